/* claims_cell--1.3--1.4.sql: the cell side hardened. */

\echo Use "ALTER EXTENSION claims_cell UPDATE TO '1.4'" to load this file. \quit

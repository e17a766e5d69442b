/*
 * uuid7.c
 *	  Time-ordered lease uuids: the store's own generator (src/uuid7.c), so
 *	  the leases a cell chooses land at the right edge of the store's index
 *	  exactly as the ones the store makes.
 */
#include "../../src/uuid7.c"

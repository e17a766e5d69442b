/*
 * refusal.h
 *	  The refusal contract between the claims store and claims_cell, compiled
 *	  by both: how a value is named (its label), why the store refuses a
 *	  batch (the kinds, most fundamental first), the SQLSTATE of each kind,
 *	  and the line of the error's DETAIL that names the values at fault with
 *	  their kinds for machines (refusal.c writes and parses it).
 *
 * PostgreSQL has no custom error fields. The fields ereport already
 * carries (schema, table, column, datatype, constraint) hold one name each
 * and mean objects of the server that raised the error; a refusal names
 * up to claims.max_batch_size values of several kinds, and clients show
 * those fields as object names. So the store keeps its human text and
 * ends the DETAIL with one more line in the grammar below, which the cell
 * (and any client) reads with claims_refusal_parse instead of matching the
 * wording. Released cells match the human text and never see the line as
 * anything but more DETAIL; a cell meeting a DETAIL without the line (a
 * claims 1.2 store) falls back to that text (CLAIMS_V12_*).
 *
 * The line (after the DETAIL's last newline; docs/store-api.md):
 *
 *	 line	 = "claims-refusal/1:" fault *( ";" fault )
 *	 fault	 = " " kind " " subject "=" value
 *	 kind	 = 1*( "a"-"z" / "_" )				; CLAIMS_REFUSAL_* names
 *	 subject = bucket type name (upper case), or its number when it has no
 *			   name; lower-case subjects are reserved ("lease" for a lease
 *			   uuid, "cell" for a cell id)
 *	 value	 = the value's bytes in the server encoding, with "%", ";" and
 *			   the bytes 0x00-0x1F and 0x7F written as "%" and two upper-case
 *			   hex digits; so the line never holds a newline
 *
 * Faults are listed as the request listed them (creates, then destroys).
 * The error is about the first fault of the most fundamental kind present,
 * raised with that kind's SQLSTATE. A kind a reader does not know is
 * skipped; a line that does not parse counts as absent.
 */
#ifndef CLAIMS_REFUSAL_H
#define CLAIMS_REFUSAL_H

#include "library_local.h"
#include "lib/stringinfo.h"
#include "nodes/pg_list.h"

/* "{TYPE=value}": the label of a value in the store's and the cell's messages. */
#define CLAIMS_LABEL_FORMAT "{%s=%.*s}"

/*
 * Why the store refused a value, most fundamental first (a batch with
 * several is raised as the first of them). Each kind's name and SQLSTATE
 * are claims_refusal_kinds[kind]. The reserved kinds are named now so that
 * the work adding them extends this contract instead of a message.
 */
typedef enum ClaimsRefusalKind
{
	CLAIMS_REFUSAL_NONE = 0,	/* not a refusal of this contract, or a kind
								 * this build does not know */
	CLAIMS_REFUSAL_RESTORING,	/* reserved: the store is recovering from a
								 * restore and takes no leases */
	CLAIMS_REFUSAL_NOT_CLAIMED, /* destroy or replace of a value nobody
								 * claims */
	CLAIMS_REFUSAL_OTHER_CELL,	/* destroy or replace of another cell's
								 * value */
	CLAIMS_REFUSAL_LEASE_FINISHED,	/* reserved: the lease is no longer
									 * outstanding */
	CLAIMS_REFUSAL_MOVE_TARGET, /* reserved: the value is owned already by
								 * the target cell of a move */
	CLAIMS_REFUSAL_TAKEN,		/* create of a committed claim (permanent) */
	CLAIMS_REFUSAL_LEASED,		/* the value is under another lease
								 * (temporary: retry) */
	CLAIMS_REFUSAL_NKINDS
} ClaimsRefusalKind;

/* The SQLSTATEs of the contract, as text (what libpq hands the cell). */
#define CLAIMS_SQLSTATE_TAKEN			"23505" /* unique_violation */
#define CLAIMS_SQLSTATE_LEASED			"55P03" /* lock_not_available */
#define CLAIMS_SQLSTATE_NOT_FOUND		"P0002" /* no_data_found: a value not
												 * claimed, a lease unknown */
#define CLAIMS_SQLSTATE_NOT_PERMITTED	"42501" /* insufficient_privilege:
												 * another cell's value, or a
												 * role that may not act for
												 * the cell */
#define CLAIMS_SQLSTATE_FINISHED		"55000" /* object_not_in_prerequisite_state:
												 * a lease finished the other
												 * way */
#define CLAIMS_SQLSTATE_BATCH_TOO_LARGE "54000" /* program_limit_exceeded */

/* The errcode of one of those, for ereport. */
#define CLAIMS_ERRCODE(s) MAKE_SQLSTATE((s)[0], (s)[1], (s)[2], (s)[3], (s)[4])

typedef struct ClaimsRefusalKindInfo
{
	const char *name;			/* in the line */
	const char *sqlstate;		/* what the store raises it with; NULL for a
								 * reserved kind until it is raised */
} ClaimsRefusalKindInfo;

extern CLAIMS_LIBRARY_LOCAL const ClaimsRefusalKindInfo claims_refusal_kinds[CLAIMS_REFUSAL_NKINDS];

/* One value (or, later, lease) at fault, as the line names it. */
typedef struct ClaimsFault
{
	ClaimsRefusalKind kind;		/* NONE for a kind this build does not know */
	char	   *kind_name;
	char	   *subject;		/* bucket type name */
	char	   *value;			/* unescaped, NUL-terminated */
} ClaimsFault;

/* The line's prefix, after the DETAIL's last newline. */
#define CLAIMS_REFUSAL_MARKER "claims-refusal/1:"

/*
 * What a claims 1.2 store wrote instead, matched by a cell only when the
 * line is absent. Frozen: rewording the store's messages changes nothing
 * here (the store does not use them).
 */
#define CLAIMS_V12_TAKEN_SUFFIX			" is already claimed"
#define CLAIMS_V12_LEASED_SUFFIX		" is under another lease"
#define CLAIMS_V12_OTHER_CELL_PREFIX	"cannot destroy "

extern CLAIMS_LIBRARY_LOCAL char *claims_label(const char *type, const char *value, int len);
extern CLAIMS_LIBRARY_LOCAL void claims_refusal_line_start(StringInfo detail);
extern CLAIMS_LIBRARY_LOCAL void claims_refusal_line_add(StringInfo detail, ClaimsRefusalKind kind,
														 const char *subject, const char *value, int len);
extern CLAIMS_LIBRARY_LOCAL List *claims_refusal_parse(const char *detail);
extern CLAIMS_LIBRARY_LOCAL char *claims_refusal_text(const char *detail);

#endif							/* CLAIMS_REFUSAL_H */

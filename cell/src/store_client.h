/*
 * store_client.h
 *	  What the lease protocol (xact.c) asks of the store and learns from it
 *	  (store_client.c): requests, labels, refusals, barriers.
 */
#ifndef CLAIMS_CELL_STORE_CLIENT_H
#define CLAIMS_CELL_STORE_CLIENT_H

#include "claims_cell.h"
#include "refusal.h"

/* One claimed value after folding the transaction's changes. */
typedef struct CellNet
{
	char	   *key;			/* "TYPE=value" */
	bool		existed;		/* some row's first change destroyed it */
	CellChange *last;			/* the final holder's create, else the last change */
	List	   *rows;			/* CellRowChanges while folding */
} CellNet;

extern char *cell_value_label(const CellChange *c);
extern char *cell_request(List *nets, int64 cell_id, const char *lease, int *ncreates,
						  int *ndestroys);
extern List *cell_split(List *nets, int limit);
extern void cell_raise_refusal(List *nets, const CellCallResult *r, int64 cell_id) pg_attribute_noreturn();
extern bool cell_drop_unclaimed(List **nets, const CellCallResult *r, int64 cell_id,
								const char *superseded);
extern void cell_count_refusal(const CellCallResult *r);
extern bool cell_store_barrier(void);

#endif							/* CLAIMS_CELL_STORE_CLIENT_H */

/*
 * bgw_database.c
 *	  The database of the background worker's cycles: the store's own code
 *	  (src/bgw_database.c), so both launchers judge a database alike.
 */
#include "../../src/bgw_database.c"

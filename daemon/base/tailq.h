/* <sys/queue.h>'s tail queues, with the safe loop glibc's lacks. */
#ifndef SOTTOD_TAILQ_H
#define SOTTOD_TAILQ_H

#include <sys/queue.h>

#ifndef TAILQ_FOREACH_SAFE
#define TAILQ_FOREACH_SAFE(var, head, field, tvar)			\
	for ((var) = TAILQ_FIRST(head);					\
	    (var) != NULL && ((tvar) = TAILQ_NEXT(var, field), 1);	\
	    (var) = (tvar))
#endif

#endif

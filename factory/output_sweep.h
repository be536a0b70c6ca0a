/*
 * output_sweep.h - removing what killed builds left beside an output folder.
 *
 * A build assembles OUT in OUT.partial-PID (flocked for as long as the build
 * lives), keeps the gates' scratch in OUT.gates-PID, and on a file system
 * that cannot exchange two folders moves the old OUT aside as OUT.old-PID
 * for an instant.  A build killed with SIGKILL leaves these behind; the next
 * build over the same OUT removes those whose PID's partial folder no live
 * process holds (the kernel drops the lock of a dead one, so a reused PID
 * does not fool it), and puts an OUT.old-PID back when OUT itself is gone.
 */
#ifndef NF_FACTORY_OUTPUT_SWEEP_H
#define NF_FACTORY_OUTPUT_SWEEP_H

/* Sweep the leftovers of dead builds beside out (the final OUT path). */
int nf_output_sweep(const char *out);

#endif

// Package supervise is the box's service supervisor, in place of
// supervisord: a fixed table of programs (data, not ini) started in
// priority order, restarted by policy (autorestart true, false or
// unexpected with expected exit codes), retried with a growing backoff
// until FATAL, stopped with their stop signal and then SIGKILL of the whole
// process group, run as their user with supplementary groups, and logged
// to size-rotated files. States and their meaning follow supervisord's
// (STOPPED, STARTING, RUNNING, BACKOFF, STOPPING, EXITED, FATAL).
//
// One goroutine per program owns its state; a single reaper waits for
// children, so the supervisor's own exit statuses are never stolen and, in
// a subreaper or PID 1, orphans are reaped too.
package supervise

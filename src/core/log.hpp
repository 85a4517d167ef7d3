// Rank-aware logging. Rank 0 prints information; every rank prints warnings and
// errors, prefixed with its rank so that a failure on one rank is attributable.
// Thread-safe: each call writes one whole line under a mutex.
#pragma once

#include <string>

namespace hpctrain {

// Set once after MPI is initialised; before that the rank is taken to be 0.
void set_log_rank(int rank, int world_size);
int log_rank();
// Whether this process is one rank of several (set_log_rank): its messages name the rank.
bool log_names_rank();
// From now on every line starts with the UTC time, "2026-11-26T02:10:11Z " (training and
// evaluation, whose logs are read after the fact; tools' reports stay bare).
void set_log_timestamps(bool on);

// Rank 0 of the launcher (PMI_RANK, PMIX_RANK, OMPI_COMM_WORLD_RANK or SLURM_PROCID, known
// before MPI is initialised), or not launched: the process that prints what every rank
// would print alike before MPI is initialised (--help, a bad command line).
bool prints_for_all_ranks();

void log_info(const std::string& message);   // rank 0 only, stdout
void log_warn(const std::string& message);   // any rank, stderr, one line (one_line)
void log_error(const std::string& message);  // any rank, stderr, one line (one_line)

// `text` on one line: control characters escaped (\n, \t, \xHH). A message may quote a
// key, a path or a name as the user gave it, newlines and escape sequences included.
std::string one_line(const std::string& text);

}  // namespace hpctrain

// Two small all-reduces: the worst exit code, and the lowest rank that failed.
#include "comm/agreement.hpp"

#include <exception>
#include <string>

#include "comm/mpi_check.hpp"
#include "core/error.hpp"
#include "core/log.hpp"

namespace hpctrain {

int run_and_agree(MPI_Comm comm, const std::function<void()>& local_work) {
  int code = 0;
  std::string message;
  try {
    local_work();
  } catch (const Error& e) {
    code = e.exit_code();
    message = e.what();
  } catch (const std::exception& e) {
    code = kExitFailure;
    message = e.what();
  }
  int rank = 0, size = 1;
  HT_CHECK_MPI(MPI_Comm_rank(comm, &rank));
  HT_CHECK_MPI(MPI_Comm_size(comm, &size));
  int worst = code;
  HT_CHECK_MPI(MPI_Allreduce(MPI_IN_PLACE, &worst, 1, MPI_INT, MPI_MAX, comm));
  if (worst == 0) return 0;
  int first_failed = code != 0 ? rank : size;
  HT_CHECK_MPI(MPI_Allreduce(MPI_IN_PLACE, &first_failed, 1, MPI_INT, MPI_MIN, comm));
  if (rank == first_failed) log_error(message);
  return worst;
}

}  // namespace hpctrain

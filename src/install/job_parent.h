// Is this process a rank, or one of a rank's descendants? Every process
// under a rank inherits its job identity (TORCHELASTIC_RUN_ID, RANK):
// DataLoader workers, a forkserver, a tool the training script runs. The
// rank is the one torchrun's agent started, and the agent does not carry
// the job identity itself: a process whose parent carries the same run id
// and rank is a descendant. Install time, normal context.
#pragma once

namespace faultline::install {

// True when the parent process's environment (as it was when the parent
// started, /proc/PPID/environ) holds the same TORCHELASTIC_RUN_ID and RANK
// as this process's. False when it cannot be read (another user's process,
// a parent outside this pid namespace): the process is then taken as the
// rank.
bool parent_in_same_job();

}  // namespace faultline::install

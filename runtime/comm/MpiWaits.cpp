//===- MpiWaits.cpp - Waiting for an MPI communicator's messages ----------===//
//
// A wait polls its requests rather than blocking in MPI, so that it sees the rank's wait limit
// and meanwhile answers the other processes' questions. One that runs out of time asks the
// ranks it waits for whom they wait for, and so on, to name the rank the job waits for (or the
// ranks that wait for one another), and tells every process, so that all of them give the same
// reason as the job ends.
//
//===----------------------------------------------------------------------===//

#include "runtime/comm/MpiCommunicatorImpl.h"

#include <chrono>
#include <map>
#include <thread>

namespace tessel::rt::mpi::detail {

/// The tags of the messages on the control communicator, which only runs out of time uses.
constexpr int kWhomQueryTag = 1, kWhomAnswerTag = 2, kVerdictTag = 3;
/// How long an investigation waits for a process's answer: one waiting for a peer answers
/// within a millisecond.
constexpr double kAnswerSeconds = 3.0;

template <typename WaitingFor> void MpiCommunicator::answerQuestions(WaitingFor waitingFor) {
  for (;;) {
    int asked = 0;
    MPI_Status status;
    if (MPI_Iprobe(MPI_ANY_SOURCE, kWhomQueryTag, control_, &asked, &status) != MPI_SUCCESS ||
        !asked)
      break;
    int32_t from = 0;
    MPI_Recv(&from, 1, MPI_INT32_T, status.MPI_SOURCE, kWhomQueryTag, control_, MPI_STATUS_IGNORE);
    answers_.emplace_back();
    Answer &a = answers_.back();
    for (uint32_t r : waitingFor())
      a.ranks.push_back(static_cast<int32_t>(r));
    MPI_Isend(a.ranks.data(), static_cast<int>(a.ranks.size()), MPI_INT32_T, status.MPI_SOURCE,
              kWhomAnswerTag, control_, &a.request);
  }
  for (auto it = answers_.begin(); it != answers_.end();) {
    int done = 0;
    MPI_Test(&it->request, &done, MPI_STATUS_IGNORE);
    it = done ? answers_.erase(it) : std::next(it);
  }
}

bool MpiCommunicator::waitAll(std::vector<MPI_Request> &requests,
                              const std::vector<uint32_t> &peers, const std::string &what,
                              std::string &error) {
  const Clock::time_point started = Clock::now(), deadline = deadlineFromNow();
  std::vector<int> indices(requests.size());
  auto waitingFor = [&] {
    std::vector<uint32_t> ranks;
    for (size_t i = 0; i < requests.size(); ++i)
      if (requests[i] != MPI_REQUEST_NULL &&
          std::find(ranks.begin(), ranks.end(), peers[i]) == ranks.end())
        ranks.push_back(peers[i]);
    std::sort(ranks.begin(), ranks.end());
    return ranks;
  };
  for (;;) {
    int finished = 0;
    const int rc = MPI_Testsome(static_cast<int>(requests.size()), requests.data(), &finished,
                                indices.data(), MPI_STATUSES_IGNORE);
    if (rc != MPI_SUCCESS)
      return ok(rc, what, error);
    if (finished == MPI_UNDEFINED) // Every request is done.
      return true;
    if (finished > 0)
      continue;
    const Clock::time_point now = Clock::now();
    // The questions and a verdict need no haste: a short wait does not look for them.
    if (now - started < std::chrono::milliseconds(1))
      continue;
    answerQuestions(waitingFor);
    std::string verdict;
    if (now >= deadline || takeVerdict(verdict)) {
      if (verdict.empty()) {
        error = what + ": " + describeWait(started) + " for ";
        error += investigate(waitingFor(), verdict);
      }
      if (verdict.empty())
        announce(error);
      else
        error = what + " ends with the job: " + verdict;
      // The buffers go with the operation: no late message may land in them.
      for (MPI_Request &r : requests)
        if (r != MPI_REQUEST_NULL) {
          MPI_Cancel(&r);
          MPI_Request_free(&r);
        }
      return false;
    }
    if (now - started > std::chrono::seconds(1))
      std::this_thread::sleep_for(std::chrono::milliseconds(1));
    else if (now - started > std::chrono::milliseconds(10))
      std::this_thread::sleep_for(std::chrono::microseconds(100));
  }
}

std::string MpiCommunicator::investigate(const std::vector<uint32_t> &direct,
                                         std::string &verdict) {
  using Seconds = std::chrono::duration<double>;
  std::map<uint32_t, Clock::time_point> asked;    // rank -> when it was asked
  std::map<uint32_t, std::vector<uint32_t>> said; // rank -> whom it waits for
  auto ask = [&](uint32_t r) {
    if (r == rank_ || asked.count(r))
      return;
    asked[r] = Clock::now();
    MPI_Request request;
    if (MPI_Isend(&rankId_, 1, MPI_INT32_T, static_cast<int>(r), kWhomQueryTag, control_,
                  &request) == MPI_SUCCESS)
      MPI_Request_free(&request); // rankId_ outlives the send.
  };
  for (uint32_t r : direct)
    ask(r);
  for (;;) {
    answerQuestions([&] { return direct; });
    if (takeVerdict(verdict))
      return std::string();
    int answered = 0;
    MPI_Status status;
    if (MPI_Iprobe(MPI_ANY_SOURCE, kWhomAnswerTag, control_, &answered, &status) == MPI_SUCCESS &&
        answered) {
      int count = 0;
      MPI_Get_count(&status, MPI_INT32_T, &count);
      std::vector<int32_t> ranks(static_cast<size_t>(std::max(count, 0)));
      MPI_Recv(ranks.data(), count, MPI_INT32_T, status.MPI_SOURCE, kWhomAnswerTag, control_,
               MPI_STATUS_IGNORE);
      std::vector<uint32_t> &whom = said[static_cast<uint32_t>(status.MPI_SOURCE)];
      for (int32_t r : ranks)
        if (r >= 0 && static_cast<uint32_t>(r) < size_) {
          whom.push_back(static_cast<uint32_t>(r));
          ask(static_cast<uint32_t>(r));
        }
      continue;
    }
    bool pending = false;
    for (const auto &[r, when] : asked)
      pending |= !said.count(r) && Seconds(Clock::now() - when).count() < kAnswerSeconds;
    if (!pending)
      break;
    std::this_thread::sleep_for(std::chrono::milliseconds(1));
  }
  return explainWait(
      rank_, direct,
      [&](uint32_t q) -> const std::vector<uint32_t> * {
        auto it = said.find(q);
        return it == said.end() ? nullptr : &it->second;
      },
      "does not answer: it is stopped, hung or lost, or far slower than expected");
}

void MpiCommunicator::announce(const std::string &verdict) {
  verdict_ = verdict;
  std::vector<MPI_Request> sent;
  for (uint32_t r = 0; r < size_; ++r)
    if (r != rank_ &&
        MPI_Isend(verdict_.data(), static_cast<int>(verdict_.size()), MPI_CHAR, static_cast<int>(r),
                  kVerdictTag, control_, &sent.emplace_back()) != MPI_SUCCESS)
      sent.pop_back();
  const Clock::time_point until = Clock::now() + std::chrono::seconds(1);
  for (int done = 0; !done && Clock::now() < until;) {
    MPI_Testall(static_cast<int>(sent.size()), sent.data(), &done, MPI_STATUSES_IGNORE);
    std::this_thread::sleep_for(std::chrono::milliseconds(1));
  }
}

bool MpiCommunicator::takeVerdict(std::string &verdict) {
  int sent = 0;
  MPI_Status status;
  if (MPI_Iprobe(MPI_ANY_SOURCE, kVerdictTag, control_, &sent, &status) != MPI_SUCCESS || !sent)
    return false;
  int count = 0;
  MPI_Get_count(&status, MPI_CHAR, &count);
  verdict.assign(static_cast<size_t>(std::max(count, 0)), '\0');
  MPI_Recv(verdict.data(), count, MPI_CHAR, status.MPI_SOURCE, kVerdictTag, control_,
           MPI_STATUS_IGNORE);
  return !verdict.empty();
}

} // namespace tessel::rt::mpi::detail

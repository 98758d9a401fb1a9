// Symbols shaped like Dynamo's guard code in libtorch_python
// (torch::dynamo::<anonymous>::GuardManager), crashing on a null pointer.
// Called through ctypes by test_torch_reports.py's fake torch package.
namespace torch::dynamo {
namespace {

struct GuardManager {
  const int* value;  // null: the corrupted cache entry
  int check(int x) const { return *value + x; }
};

}  // namespace

int run_root_guard_manager(const GuardManager* root, int x) {
  return root->check(x) + 1;
}

}  // namespace torch::dynamo

extern "C" __attribute__((visibility("default"))) int fake_dynamo_check_guards(int x) {
  torch::dynamo::GuardManager broken{nullptr};
  return torch::dynamo::run_root_guard_manager(&broken, x);
}

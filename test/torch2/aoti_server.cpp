// A small inference server over an AOTInductor model package: loads the
// package (argv[1]) with libtorch's AOTIModelPackageLoader, then serves one
// request per line of stdin, "ID I0 I1": the model gathers x[I0], x[I1] of a
// 16-element x. Each request's id is the worker thread's crash key
// ("request"), so a crash report names the request that caused it. A
// poisoned request (an index far out of range) faults inside the generated
// kernel, whose bounds check was compiled out.
#include <ATen/ATen.h>
#include <faultline/faultline.h>
#include <stdio.h>
#include <string.h>
#include <torch/csrc/inductor/aoti_package/model_package_loader.h>

#include <string>
#include <vector>

namespace {

__attribute__((noinline)) float serve(torch::inductor::AOTIModelPackageLoader& model,
                                      const at::Tensor& x, long long i0, long long i1) {
  std::vector<at::Tensor> in = {
      x, at::tensor({static_cast<int64_t>(i0), static_cast<int64_t>(i1)}, at::kLong)};
  std::vector<at::Tensor> out = model.run(in);
  return out.at(0).sum().item<float>();
}

}  // namespace

int main(int argc, char** argv) {
  if (argc != 2) {
    fprintf(stderr, "usage: aoti_server PACKAGE.pt2 < requests\n");
    return 2;
  }
  if (faultline_install(nullptr) != 0) {
    fprintf(stderr, "aoti_server: faultline_install failed\n");
    return 3;
  }
  torch::inductor::AOTIModelPackageLoader model(argv[1]);
  at::Tensor x = at::arange(16, at::kFloat);
  printf("loaded %s\n", argv[1]);
  fflush(stdout);
  char line[256];
  while (fgets(line, sizeof line, stdin)) {
    char id[64];
    long long i0 = 0, i1 = 0;
    if (sscanf(line, "%63s %lld %lld", id, &i0, &i1) != 3) continue;
    faultline_thread_annotate("request", id);
    float r = serve(model, x, i0, i1);
    printf("%s %g\n", id, r);
    fflush(stdout);
  }
  return 0;
}

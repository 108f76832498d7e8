// runtime/cpu/cpu_jit.cpp — the host target, and an LLVM module (bitcode or IR text) -> verified ->
// O3 (new pass manager) -> relocatable object file in memory.
//
// Nothing here aborts on bad input: parse and verifier errors, unknown
// targets and backend diagnostics (collected through a context callback,
// instead of LLVM's default handler which exits) become fusejit::Errors.
#include <algorithm>
#include <memory>
#include <mutex>
#include <string>

#include <deque>

#include <llvm/ADT/SmallVector.h>
#include <llvm/Analysis/TargetLibraryInfo.h>
#include <llvm/ADT/StringMap.h>
#include <llvm/Config/llvm-config.h>
#include <llvm/IR/DiagnosticInfo.h>
#include <llvm/IR/DiagnosticPrinter.h>
#include <llvm/IR/LLVMContext.h>
#include <llvm/IR/LegacyPassManager.h>
#include <llvm/IR/Module.h>
#include <llvm/IR/Verifier.h>
#include <llvm/IRReader/IRReader.h>
#include <llvm/MC/TargetRegistry.h>
#include <llvm/Passes/PassBuilder.h>
#include <llvm/Support/CodeGen.h>
#include <llvm/Support/CommandLine.h>
#include <llvm/Support/DynamicLibrary.h>
#include <llvm/Support/Host.h>
#include <llvm/Support/MemoryBuffer.h>
#include <llvm/Support/SourceMgr.h>
#include <llvm/Support/TargetSelect.h>
#include <llvm/Support/raw_ostream.h>
#include <llvm/Target/TargetMachine.h>
#include <llvm/Target/TargetOptions.h>

#include "runtime/cpu/cpu_executable.h"
#include "runtime/cpu/cpu_jit_internal.h"
#include "runtime/log.h"

namespace fusejit::cpu {

namespace {
// glibc's libmvec (vector expf, tanhf, erff, ...), loaded into the process so
// that generated code can call it; false where it is missing (not glibc).
bool vector_math_loaded = false;
}  // namespace

void init_llvm_native() {
  static std::once_flag once;
  std::call_once(once, [] {
    llvm::InitializeNativeTarget();
    llvm::InitializeNativeTargetAsmPrinter();
    llvm::InitializeNativeTargetAsmParser();
    vector_math_loaded = !llvm::sys::DynamicLibrary::LoadLibraryPermanently("libmvec.so.1");
    // No loop strength reduction in the backend: it was a third of the machine-code time of a conv
    // kernel (b in bench/bench_cpu.py: 317 -> 187 ms cold compile, same run time), and the generated
    // loops already step pointers (the micro-kernel's panels are pointer induction variables).
    // An LLVM option, so it holds for every user of this process's libLLVM.
    auto& options = llvm::cl::getRegisteredOptions();
    if (auto it = options.find("disable-lsr"); it != options.end())
      static_cast<llvm::cl::opt<bool>*>(it->second)->setValue(true);
  });
}

CpuTarget host_target() { return host_cpu_target(); }

std::string llvm_version() { return LLVM_VERSION_STRING; }

namespace {

// Collects backend errors instead of letting LLVM's default handler exit().
struct Diagnostics {
  std::string errors;
  static void handle(const llvm::DiagnosticInfo& info, void* self) {
    if (info.getSeverity() != llvm::DS_Error) return;
    std::string text;
    llvm::raw_string_ostream os(text);
    llvm::DiagnosticPrinterRawOStream printer(os);
    info.print(printer);
    os.flush();
    auto* d = static_cast<Diagnostics*>(self);
    d->errors += (d->errors.empty() ? "" : "; ") + text;
  }
};

std::string trim(std::string s) {
  while (!s.empty() && (s.back() == '\n' || s.back() == ' ')) s.pop_back();
  return s;
}

}  // namespace

namespace {

// For `target`; empty fields: the host's.
Expected<std::unique_ptr<llvm::TargetMachine>> make_target_machine(const CpuTarget& target) {
  init_llvm_native();
  CpuTarget host = host_target();
  std::string triple = target.triple.empty() ? host.triple : target.triple;
  std::string cpu = target.triple.empty() && target.cpu.empty() ? host.cpu : target.cpu;
  std::string features =
      target.triple.empty() && target.features.empty() ? host.features : target.features;
  std::string why;
  const llvm::Target* t = llvm::TargetRegistry::lookupTarget(triple, why);
  if (!t) return Error("no LLVM target for '" + triple + "': " + why);
  llvm::TargetOptions options;
  std::unique_ptr<llvm::TargetMachine> tm(t->createTargetMachine(
      triple, cpu, features, options, llvm::Reloc::PIC_, llvm::None, llvm::CodeGenOpt::Aggressive));
  if (!tm) return Error("LLVM could not create a target machine for " + triple + " (cpu '" + cpu + "')");
  return tm;
}

// Tells the loop vectorizer about libmvec's variants of the math functions
// the generated code calls (x86-64 vector function ABI names: _ZGV, ISA b/d/e
// = SSE/AVX2/AVX-512, N lanes, v per argument), for the ISAs `features` has.
void add_vector_math(llvm::TargetLibraryInfoImpl& tlii, const std::string& triple, const std::string& features) {
  if (!vector_math_loaded || llvm::Triple(triple).getArch() != llvm::Triple::x86_64) return;
  static std::mutex mu;
  static std::deque<std::string> names;  // VecDesc holds StringRefs
  std::lock_guard<std::mutex> lock(mu);
  auto has = [&](const char* f) { return ("," + features + ",").find(std::string(",+") + f + ",") != std::string::npos; };
  struct Isa { char code; int lanes; bool ok; };
  const Isa isas[] = {{'b', 4, true}, {'d', 8, has("avx2")}, {'e', 16, has("avx512f")}};
  const std::pair<const char*, int> functions[] = {{"expf", 1},   {"logf", 1},   {"tanhf", 1}, {"erff", 1},
                                                   {"expm1f", 1}, {"log1pf", 1}, {"powf", 2}};
  std::vector<llvm::VecDesc> descs;
  for (const Isa& isa : isas) {
    if (!isa.ok) continue;
    for (const auto& [fn, arity] : functions) {
      names.push_back(std::string("_ZGV") + isa.code + "N" + std::to_string(isa.lanes) + std::string(arity, 'v') + "_" + fn);
      descs.push_back({fn, names.back(), llvm::ElementCount::getFixed(static_cast<unsigned>(isa.lanes))});
    }
  }
  tlii.addVectorizableFunctions(descs);
}

}  // namespace

Expected<std::vector<char>> compile_object(const CpuProgram& program) {
  long long start = log::now_ns();
  auto tm = make_target_machine({program.target_triple, program.cpu, program.features});
  if (!tm) return Error("cpu program '" + program.name + "': " + tm.error().message);

  llvm::LLVMContext context;
  Diagnostics diags;
  context.setDiagnosticHandlerCallBack(&Diagnostics::handle, &diags);
  llvm::SMDiagnostic parse_error;
  auto buffer = llvm::MemoryBuffer::getMemBuffer(program.llvm_module, program.name, false);
  std::unique_ptr<llvm::Module> module = llvm::parseIR(buffer->getMemBufferRef(), parse_error, context);
  if (!module) {
    std::string msg;
    llvm::raw_string_ostream os(msg);
    parse_error.print(program.name.c_str(), os, /*ShowColors=*/false);
    os.flush();
    return Error("cpu program '" + program.name + "': invalid LLVM IR: " + trim(msg));
  }
  std::string verify;
  llvm::raw_string_ostream vos(verify);
  if (llvm::verifyModule(*module, &vos)) {
    vos.flush();
    return Error("cpu program '" + program.name + "': LLVM verifier: " + trim(verify));
  }
  llvm::TargetMachine& machine = **tm;
  module->setTargetTriple(machine.getTargetTriple().str());
  module->setDataLayout(machine.createDataLayout());

  {  // O3, the new pass manager (clang -O3's per-module pipeline).
    llvm::PipelineTuningOptions pto;
    pto.LoopUnrolling = true;
    pto.LoopInterleaving = true;
    pto.LoopVectorization = true;
    pto.SLPVectorization = true;
    llvm::PassBuilder pb(&machine, pto);
    llvm::LoopAnalysisManager lam;
    llvm::FunctionAnalysisManager fam;
    llvm::CGSCCAnalysisManager cgam;
    llvm::ModuleAnalysisManager mam;
    llvm::TargetLibraryInfoImpl tlii(machine.getTargetTriple());
    add_vector_math(tlii, machine.getTargetTriple().str(), program.features);
    fam.registerPass([&] { return llvm::TargetLibraryAnalysis(tlii); });  // before the defaults
    pb.registerModuleAnalyses(mam);
    pb.registerCGSCCAnalyses(cgam);
    pb.registerFunctionAnalyses(fam);
    pb.registerLoopAnalyses(lam);
    pb.crossRegisterProxies(lam, fam, cgam, mam);
    llvm::ModulePassManager mpm = pb.buildPerModuleDefaultPipeline(llvm::OptimizationLevel::O3);
    mpm.run(*module, mam);
  }
  long long optimized = log::now_ns();

  llvm::SmallVector<char, 0> object;
  {
    llvm::raw_svector_ostream os(object);
    llvm::legacy::PassManager codegen;
    if (machine.addPassesToEmitFile(codegen, os, nullptr, llvm::CGFT_ObjectFile))
      return Error("cpu program '" + program.name + "': the target cannot emit object files");
    codegen.run(*module);
  }
  if (!diags.errors.empty())
    return Error("cpu program '" + program.name + "': LLVM: " + trim(diags.errors));
  if (log::enabled(log::Level::Info))
    log::info("llvm " + program.name + ": O3 " + std::to_string((optimized - start) / 1000000.0).substr(0, 6) +
              " ms, total " + log::elapsed_ms(start) + ", " + std::to_string(object.size()) + " bytes");
  return std::vector<char>(object.begin(), object.end());
}

}  // namespace fusejit::cpu

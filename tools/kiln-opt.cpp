// kiln-opt: reads graph IR text, verifies it, runs a pass pipeline, prints the result.
//   kiln-opt [file|-] [--pipeline=dce,cse] [--print-after-all] [--split-input-file]
//            [--emit=cpp|cuda]
// Loop programs (text starting with `program`) are verified and printed back, or with
// --emit=cpp as the C++ source the code generator makes of them (--emit=cuda: the CUDA source,
// then the launch list as `// launch:` comment lines); graph passes do not apply to them. A
// pipeline ending in `lower-loops` lowers each (prims) graph after the graph passes and prints
// the loop program (or with --emit its source). --emit on a graph without lower-loops completes
// the pipeline: decompose-prims, lower-loops, schedule.
// Errors go to stderr as "file:line:col: error: ..." and make the exit status 1.
#include <cstdint>
#include <fstream>
#include <iostream>
#include <sstream>

#include "codegen/CppCodegen.h"
#include "codegen/CudaCodegen.h"
#include "compiler/Lowering.h"
#include "ir/Parser.h"
#include "ir/Printer.h"
#include "ir/Verifier.h"
#include "ir/loop/Parser.h"
#include "ir/loop/Printer.h"
#include "ir/loop/Verifier.h"
#include "passes/PassManager.h"
#include "passes/loop/Schedule.h"

using namespace kiln;

namespace {

const std::string kSplitMarker = "// -----";

// What --emit asks for: the loop program itself, its C++ or its CUDA.
enum class Emit { None, Cpp, Cuda };

std::string emitted(const LoopProgram& p, Emit emit) {
  if (emit == Emit::Cpp) return codegen::emitCpp(p);
  if (emit == Emit::None) return printLoopProgram(p);
  codegen::CudaProgram cuda = codegen::emitCuda(p);
  std::string out = cuda.source, list = codegen::printLaunchList(cuda);
  out += "\n// launch list of @" + p.name + "\n";
  for (size_t at = 0; at < list.size();) {
    size_t end = list.find('\n', at);
    out += "// launch: " + list.substr(at, end - at) + "\n";
    at = end + 1;
  }
  return out;
}

struct Chunk {
  size_t begin, end;
  int firstLine;
};

// With --split-input-file, the input is cut at every line starting with "// -----".
std::vector<Chunk> splitInput(const std::string& s, bool split) {
  if (!split) return {{0, s.size(), 1}};
  std::vector<Chunk> chunks;
  size_t begin = 0;
  int firstLine = 1, line = 1;
  for (size_t pos = 0; pos <= s.size(); ++line) {
    size_t eol = std::min(s.find('\n', pos), s.size());
    if (s.compare(pos, kSplitMarker.size(), kSplitMarker) == 0) {
      chunks.push_back({begin, pos, firstLine});
      begin = std::min(eol + 1, s.size());
      firstLine = line + 1;
    }
    pos = eol + 1;
  }
  chunks.push_back({begin, s.size(), firstLine});
  return chunks;
}

void usage(std::ostream& out) {
  out << "usage: kiln-opt [file|-] [--pipeline=p1,p2] [--print-after-all] [--split-input-file]\n"
         "                [--emit=cpp|cuda] [--print-schedule-log] [--max-kernel-ops=N]\n"
         "passes:\n";
  for (const PassInfo& p : registeredPasses())
    out << "  " << p.name << "  " << p.description << "\n";
  out << "  lower-loops  (after the graph passes) lower each prims graph to a loop program\n"
      << passes::loop::describeSchedulePasses();
}

// The loop passes of a pipeline: a trailing `lower-loops` and the scheduling passes after it
// (split off the pipeline, which keeps the graph passes). A pipeline of scheduling passes alone
// applies to loop programs.
struct LoopPipeline {
  bool lower = false;
  std::vector<std::string> schedulePasses;
};

LoopPipeline takeLoopPasses(std::string& pipeline) {
  std::vector<std::string> names;
  for (size_t pos = 0; pos <= pipeline.size() && !pipeline.empty();) {
    size_t comma = std::min(pipeline.find(',', pos), pipeline.size());
    names.push_back(pipeline.substr(pos, comma - pos));
    pos = comma + 1;
  }
  LoopPipeline lp;
  size_t keep = names.size();
  while (keep > 0 && passes::loop::scheduleOptionsFor({names[keep - 1]})) --keep;
  if (keep > 0 && names[keep - 1] == "lower-loops") {
    lp.lower = true;
    --keep;
  } else if (keep > 0) {
    return lp; // scheduling passes before graph passes: left to PassManager to reject
  }
  for (size_t i = keep; i < names.size(); ++i)
    if (names[i] != "lower-loops") lp.schedulePasses.push_back(names[i]);
  std::string rest;
  for (size_t i = 0; i < keep; ++i) rest += (i ? "," : "") + names[i];
  pipeline = rest;
  return lp;
}

// Schedules `p` when the pipeline has scheduling passes; the decisions go to stderr with
// --print-schedule-log.
int64_t gMaxKernelOps = passes::loop::kMaxKernelOps; // --max-kernel-ops=N

void scheduleIfAsked(LoopProgram& p, const LoopPipeline& lp, bool printLog) {
  if (lp.schedulePasses.empty()) return;
  passes::loop::ScheduleOptions options = *passes::loop::scheduleOptionsFor(lp.schedulePasses);
  options.maxKernelOps = gMaxKernelOps;
  passes::loop::ScheduleResult r = passes::loop::schedule(p, options);
  if (printLog) std::cerr << "// schedule @" << p.name << "\n" << r.logText();
}

// Lowers graphs to loop programs and prints them (or their C++).
bool lowerAndPrint(const std::vector<Graph>& graphs, const LoopPipeline& lp, bool printLog,
                   Emit emit, const std::string& file) {
  for (const Graph& g : graphs) {
    try {
      LoopProgram p = compiler::lowerToLoops(g);
      scheduleIfAsked(p, lp, printLog);
      std::cout << emitted(p, emit);
    } catch (const Error& e) {
      std::cerr << file << ": error: graph @" << g.name() << ": " << e.what() << "\n";
      return false;
    }
  }
  return true;
}

// Parses and verifies a chunk of loop programs; prints them back (or their C++) or the errors.
bool processLoopChunk(std::string_view chunk, int firstLine, const PassManager& pm,
                      const LoopPipeline& lp, bool printLog, Emit emit,
                      const std::string& file, std::string_view source) {
  LoopParseResult parsed = parseLoopPrograms(chunk, firstLine);
  if (parsed.error) {
    std::cerr << formatDiagnostic(*parsed.error, file, source);
    return false;
  }
  bool ok = true;
  for (const LoopProgram& p : parsed.programs)
    for (const Diagnostic& d : verifyLoopProgram(p)) {
      std::cerr << formatDiagnostic(d, file, source);
      ok = false;
    }
  if (!ok) return false;
  if (!pm.passes().empty()) {
    std::cerr << file << ": error: the pipeline's passes work on graphs, not loop programs\n";
    return false;
  }
  for (LoopProgram& p : parsed.programs) scheduleIfAsked(p, lp, printLog);
  if (emit != Emit::None) {
    for (const LoopProgram& p : parsed.programs) {
      try {
        std::cout << emitted(p, emit);
      } catch (const Error& e) {
        std::cerr << file << ": error: " << e.what() << "\n";
        ok = false;
      }
    }
    return ok;
  }
  std::cout << printLoopPrograms(parsed.programs);
  return true;
}

// Parses, verifies and transforms one chunk of the input; prints the result or the errors.
bool processChunk(std::string_view chunk, int firstLine, const PassManager& pm,
                  const PipelineOptions& options, const LoopPipeline& lp, bool printLog,
                  Emit emit, const std::string& file, std::string_view source) {
  if (isLoopProgramText(chunk))
    return processLoopChunk(chunk, firstLine, pm, lp, printLog, emit, file, source);
  if (!lp.schedulePasses.empty() && !lp.lower) {
    std::cerr << file << ": error: scheduling passes need a loop program (after lower-loops)\n";
    return false;
  }
  ParseResult parsed = parseGraphs(chunk, firstLine);
  if (parsed.error) {
    std::cerr << formatDiagnostic(*parsed.error, file, source);
    return false;
  }
  for (Graph& g : parsed.graphs) {
    std::vector<Diagnostic> problems = verify(g);
    for (const Diagnostic& d : problems)
      std::cerr << formatDiagnostic(d, file, source);
    if (!problems.empty()) return false;
    try {
      pm.run(g, options);
      // --emit from a graph stage runs the rest of the way: prims, loops, schedule.
      if (emit != Emit::None && !lp.lower) PassManager::parse("decompose-prims").run(g, options);
    } catch (const IRError& e) {
      std::cerr << formatDiagnostic(e.diagnostic(), file, source);
      return false;
    }
  }
  if (lp.lower) return lowerAndPrint(parsed.graphs, lp, printLog, emit, file);
  if (emit != Emit::None)
    return lowerAndPrint(parsed.graphs, LoopPipeline{true, {"schedule"}}, printLog, emit, file);
  std::cout << printGraphs(parsed.graphs);
  return true;
}

} // namespace

int main(int argc, char** argv) {
  std::string file = "-", pipeline;
  bool split = false, printLog = false;
  Emit emit = Emit::None;
  PipelineOptions options;
  options.log = &std::cerr;
  for (int i = 1; i < argc; ++i) {
    std::string arg = argv[i];
    if (arg.starts_with("--pipeline=")) {
      pipeline = arg.substr(11);
    } else if (arg == "--print-after-all") {
      options.printAfterAll = true;
    } else if (arg == "--split-input-file") {
      split = true;
    } else if (arg == "--print-schedule-log") {
      printLog = true;
    } else if (arg.starts_with("--max-kernel-ops=")) {
      try {
        gMaxKernelOps = std::stoll(arg.substr(17));
      } catch (const std::exception&) {
        std::cerr << "kiln-opt: --max-kernel-ops needs a number\n";
        return 1;
      }
    } else if (arg == "--emit=cpp") {
      emit = Emit::Cpp;
    } else if (arg == "--emit=cuda") {
      emit = Emit::Cuda;
    } else if (arg == "--help" || arg == "-h") {
      usage(std::cout);
      return 0;
    } else if (arg.starts_with("-") && arg != "-") {
      usage(std::cerr);
      return 1;
    } else {
      file = arg;
    }
  }
  std::stringstream buffer;
  if (file == "-") {
    buffer << std::cin.rdbuf();
  } else {
    std::ifstream in(file, std::ios::binary);
    if (!in) {
      std::cerr << "kiln-opt: cannot open " << file << "\n";
      return 1;
    }
    buffer << in.rdbuf();
  }
  std::string source = buffer.str(), name = file == "-" ? "<stdin>" : file;
  try {
    LoopPipeline lp = takeLoopPasses(pipeline);
    PassManager pm = PassManager::parse(pipeline);
    bool ok = true;
    std::vector<Chunk> chunks = splitInput(source, split);
    for (size_t i = 0; i < chunks.size(); ++i) {
      if (i) std::cout << kSplitMarker << "\n";
      std::string_view text =
          std::string_view(source).substr(chunks[i].begin, chunks[i].end - chunks[i].begin);
      ok &= processChunk(text, chunks[i].firstLine, pm, options, lp, printLog, emit, name,
                         source);
    }
    return ok ? 0 : 1;
  } catch (const std::exception& e) {
    std::cerr << "kiln-opt: error: " << e.what() << "\n";
    return 1;
  }
}

// kiln-opt: reads graph IR text, verifies it, runs a pass pipeline, prints the result.
//   kiln-opt [file|-] [--pipeline=dce,cse] [--print-after-all] [--split-input-file] [--emit=cpp]
// Loop programs (text starting with `program`) are verified and printed back, or with
// --emit=cpp as the C++ source the code generator makes of them; graph passes do not apply to
// them.
// Errors go to stderr as "file:line:col: error: ..." and make the exit status 1.
#include <fstream>
#include <iostream>
#include <sstream>

#include "codegen/CppCodegen.h"
#include "ir/Parser.h"
#include "ir/Printer.h"
#include "ir/Verifier.h"
#include "ir/loop/Parser.h"
#include "ir/loop/Printer.h"
#include "ir/loop/Verifier.h"
#include "passes/PassManager.h"

using namespace kiln;

namespace {

const std::string kSplitMarker = "// -----";

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
         "                [--emit=cpp]\n"
         "passes:\n";
  for (const PassInfo& p : registeredPasses())
    out << "  " << p.name << "  " << p.description << "\n";
}

// Parses and verifies a chunk of loop programs; prints them back (or their C++) or the errors.
bool processLoopChunk(std::string_view chunk, int firstLine, const PassManager& pm, bool emitCpp,
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
  if (emitCpp) {
    for (const LoopProgram& p : parsed.programs) {
      try {
        std::cout << codegen::emitCpp(p);
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
                  const PipelineOptions& options, bool emitCpp, const std::string& file,
                  std::string_view source) {
  if (isLoopProgramText(chunk))
    return processLoopChunk(chunk, firstLine, pm, emitCpp, file, source);
  if (emitCpp) {
    std::cerr << file << ": error: --emit=cpp needs a loop program\n";
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
    } catch (const IRError& e) {
      std::cerr << formatDiagnostic(e.diagnostic(), file, source);
      return false;
    }
  }
  std::cout << printGraphs(parsed.graphs);
  return true;
}

} // namespace

int main(int argc, char** argv) {
  std::string file = "-", pipeline;
  bool split = false, emitCpp = false;
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
    } else if (arg == "--emit=cpp") {
      emitCpp = true;
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
    PassManager pm = PassManager::parse(pipeline);
    bool ok = true;
    std::vector<Chunk> chunks = splitInput(source, split);
    for (size_t i = 0; i < chunks.size(); ++i) {
      if (i) std::cout << kSplitMarker << "\n";
      std::string_view text =
          std::string_view(source).substr(chunks[i].begin, chunks[i].end - chunks[i].begin);
      ok &= processChunk(text, chunks[i].firstLine, pm, options, emitCpp, name, source);
    }
    return ok ? 0 : 1;
  } catch (const std::exception& e) {
    std::cerr << "kiln-opt: error: " << e.what() << "\n";
    return 1;
  }
}

"""The `kiln` command (also `python -m kiln`):

    kiln cache info | clear               the kernel cache (kiln.config.cache_dir, KILN_CACHE_DIR)
    kiln explain script.py [args...]      runs the script, then reports per compiled function
                                          its graphs, graph breaks (file:line), ops and guards
    kiln run script.py --dump DIR [args]  runs the script with KILN_DEBUG_DIR=DIR: every graph's
                                          stages written as files (kiln/compiler/debug_dir.py)

The script runs in this process as `__main__` with sys.argv = [script, args...], as `python
script.py args...` would run it. kiln's options may come before the script or right after it;
the first other argument (or everything after `--`) starts the script's own arguments.
"""
import argparse
import os
import runpy
import sys
import traceback

from kiln import config
from kiln._C import _codegen
from kiln.compiler.explain import record_all


def _format_bytes(n):
    for unit in ("B", "KiB", "MiB", "GiB"):
        if n < 1024 or unit == "GiB":
            return f"{n} B" if unit == "B" else f"{n:.1f} {unit}"
        n /= 1024


def _cache(args):
    info = _codegen.cache_info()
    if args.action == "info":
        print(f"dir: {info['dir']}")
        print(f"entries: {info['entries']} ({info['kernels']} kernels, {info['artifacts']} artifacts)")
        print(f"bytes: {info['bytes']} ({_format_bytes(info['bytes'])})")
    else:
        _codegen.cache_clear()
        print(f"removed {info['entries']} entries ({_format_bytes(info['bytes'])}) from {info['dir']}")
    return 0


def _split_script_args(argv, options):
    """(kiln option values, script, script args): `options` maps an option name to its dest;
    each takes one value (`--dump DIR` or `--dump=DIR`)."""
    values, script, rest = {}, None, list(argv)
    while rest:
        arg = rest[0]
        if arg == "--":
            rest.pop(0)
            if script is None and rest:
                script = rest.pop(0)
            break
        name, eq, value = arg.partition("=")
        if name in options:
            rest.pop(0)
            if not eq:
                if not rest:
                    raise SystemExit(f"kiln: {name} needs a value")
                value = rest.pop(0)
            values[options[name]] = value
        elif script is None and not arg.startswith("-"):
            script = rest.pop(0)
        elif arg.startswith("-") and script is None:
            raise SystemExit(f"kiln: unknown option {arg}")
        else:
            break
    if script is None:
        raise SystemExit("kiln: no script given")
    return values, script, rest


def _run_script(script, script_args):
    """Runs `script` as __main__; returns the exit status it asked for (1 when it raised)."""
    if not os.path.isfile(script):
        print(f"kiln: no such script: {script}", file=sys.stderr)
        return 2
    saved_argv, saved_path0 = sys.argv, sys.path[0] if sys.path else None
    sys.argv = [script, *script_args]
    script_dir = os.path.dirname(os.path.abspath(script))
    if sys.path:
        sys.path[0] = script_dir
    else:
        sys.path.append(script_dir)
    try:
        runpy.run_path(os.path.abspath(script), run_name="__main__")  # __file__ absolute, as python does
        return 0
    except SystemExit as exit_:
        code = exit_.code
        if code is None or isinstance(code, int):
            return code or 0
        print(code, file=sys.stderr)
        return 1
    except BaseException:  # noqa: BLE001 - report the script's error like python does, then go on
        traceback.print_exc()
        return 1
    finally:
        sys.argv = saved_argv
        if saved_path0 is not None:
            sys.path[0] = saved_path0
        sys.stdout.flush()


def _explain_report(records):
    if not records:
        return "kiln explain: no kiln.compile'd function ran\n"
    out = ""
    for i, record in enumerate(records, 1):
        title = f"Compiled function {i}: {record.name} ({record.filename}:{record.lineno})"
        body = "".join(f"  {line}\n" for line in str(record.output()).splitlines())
        out += f"{title}\n{body}"
    return out


def _explain(argv):
    _, script, script_args = _split_script_args(argv, {})
    with record_all() as session:
        status = _run_script(script, script_args)
    print(f"\n=== kiln explain: {script} ===")
    print(_explain_report(session.records()), end="")
    return status


def _run(argv):
    values, script, script_args = _split_script_args(argv, {"--dump": "dump"})
    previous = config.debug_dir
    if "dump" in values:
        config.debug_dir = os.path.abspath(values["dump"])
        os.environ["KILN_DEBUG_DIR"] = config.debug_dir  # seen by subprocesses the script starts
    try:
        status = _run_script(script, script_args)
    finally:
        dumped = config.debug_dir
        config.debug_dir = previous
    if dumped:
        print(f"kiln: graph stages written to {dumped}", file=sys.stderr)
    return status


def main(argv=None):
    argv = sys.argv[1:] if argv is None else list(argv)
    parser = argparse.ArgumentParser(
        prog="kiln", description="kiln: the kernel cache, and scripts run under kiln.compile's eyes")
    parser.add_argument("--version", action="version", version=f"kiln {_codegen.KILN_VERSION}")
    commands = parser.add_subparsers(dest="command", required=True)
    cache = commands.add_parser("cache", help="the kernel cache: info or clear")
    cache.add_argument("action", choices=["info", "clear"])
    commands.add_parser("explain", help="run a script; report graphs, breaks, ops, guards per compiled function",
                        add_help=False)
    commands.add_parser("run", help="run a script; --dump DIR writes every graph's stages (KILN_DEBUG_DIR)",
                        add_help=False)
    if argv and argv[0] in ("explain", "run"):
        # The rest belongs to the script (and may look like options), so argparse stops here.
        if len(argv) == 1 or argv[1] in ("-h", "--help"):
            usage = {"explain": "kiln explain script.py [args...]",
                     "run": "kiln run script.py [--dump DIR] [args...]"}[argv[0]]
            print(f"usage: {usage}")
            return 0 if len(argv) > 1 else 2
        return (_explain if argv[0] == "explain" else _run)(argv[1:])
    args = parser.parse_args(argv)
    return _cache(args)


if __name__ == "__main__":
    sys.exit(main())

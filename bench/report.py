#!/usr/bin/env python3
# SPDX-License-Identifier: MIT
"""bench/report.py -- turns bench/run.sh's results.tsv into RESULTS.md, results.json and
results.png (gnuplot). Standard library only.

usage: report.py --tsv FILE --machine JSON --invocation CMD --profiles "hosted far" --out DIR
"""
import argparse
import json
import os
import subprocess
import sys

# Scenario key -> (title, what it shows, scenarios whose rows are quoted as extra peers).
SCENARIOS = [
    ("pack", "Pack", "Archive a tree on local disk (tree in the page cache). lazycache also writes its index "
     "and seek table; mksquashfs makes the image the squashfuse rows read.", []),
    ("frames", "Frame size", "`lazycache pack` at other frame sizes than the default 4 MiB (the Pack "
     "table's lazycache row): archive size and time. Smaller frames compress worse and pack slower "
     "but a random small read fetches and decompresses less; 4 MiB keeps the archive within a few "
     "% of one frame while a read decompresses at most ~4 MiB.", ["pack"]),
    ("save", "Save", "Pack and upload to the store through the link. actions/cache packs to a temp file, "
     "then uploads it.", []),
    ("restore", "Full restore", "Every byte downloaded and every file created (guest page cache dropped "
     "before each run).", []),
    ("mount_ready", "Mount ready", "From the command to a mount that serves requests. Quoted against the "
     "full restore and a bare download of the archive (rows from those scenarios).", ["restore", "download"]),
    ("job", "Partial job (node)", "A CI step on the node tree: `tsc --version`, `eslint --version`, node "
     "loads lodash, express, react, rxjs and axios, then reads a fixed list of every 7th file (about 14 % "
     "of the files). With restore, the time includes the restore.", []),
    ("job_pkg", "Partial job, whole packages (node)", "The same step, but the fixed list holds every file "
     "of every 7th package (about 14 % of the files, clustered as a job that loads packages reads "
     "them).", []),
    ("job_learned", "Partial job, second run (node)", "The scattered job again on the entry its own first "
     "run saved with `unmount --save` (first run untimed: a partial hit via --restore-keys, the job, "
     "the save); the new entry stores the files the job read first, in that order, and the mount "
     "prefetches them. Quoted against the first run's rows of the partial job.", ["job"]),
    ("job_large", "Partial job (large)", "The CI step of the large fixture (bench/fixture-large/job.sh): Python "
     "imports numpy, scipy, pandas, sympy, scikit-learn, botocore and more from the tree, its JDK compiles and "
     "runs a program, its LLVM compiles an IR module, its cpp-12 preprocesses Boost, its gofmt and git run, "
     "and a fixed list of files is read. The tree is removed (and lazycache's chunk cache cleared) before "
     "each run; the page cache is not dropped, so the programs outside the tree are as warm as for the job "
     "alone.", []),
    ("job_large_learned", "Partial job, second run (large)", "The large fixture's step again on the entry its "
     "own first run saved with `unmount --save` (as the node second run). Quoted against the first run's "
     "rows.", ["job_large"]),
    ("job_traced", "Partial job, first run after a traced save (node)", "The scattered job on an entry "
     "saved from a plain directory after a traced run of the same job (`lazycache trace start`, the job, "
     "`save`; untimed): the first entry of a key line, which has the learned layout from the start. "
     "Goal: within 1.2x of the second run's time and bytes (rows quoted).", ["job_learned"]),
    ("job_large_traced", "Partial job, first run after a traced save (large)", "The large fixture's step "
     "on an entry saved after a traced run (as the node row).", ["job_large_learned"]),
    ("transfer_save", "Transfer: save", "512 MiB of incompressible bytes (the seeds' payload) saved "
     "through the link: lazycache at each concurrency x part size of cloud-cache-action's sweep (S3 parts "
     "are at least 5 MiB, so 8 x 4 MiB is refused), against tar | zstd + curl PUT and rclone.", []),
    ("transfer_restore", "Transfer: restore", "The same payload restored: `lazycache restore "
     "--extract` with the same flags, against curl GET + extract, curl | zstd -d | tar -x and rclone 8 "
     "streams + extract.", []),
    ("read_cold", "Cold full read", "Every file read once right after the restore or mount (caches dropped, "
     "lazycache's chunk cache cleared).", []),
    ("unmount", "Unmount of an idle mount", "`lazycache unmount` of a mount that has nothing in flight (a "
     "fresh mount whose background fill has ended): from the command to its exit, which waits for the "
     "daemon to write its final figures and exit. Local: a mount of the local archive `pack` wrote; over "
     "a link: a mount of the store entry (the unmount itself never needs the store).", []),
    ("find_warm", "Warm find", "`find DIR | wc -l` on a filesystem that was walked once before.", []),
    ("read_warm", "Warm reads", "`find DIR -type f -print0 | xargs -0 cat` after one untimed full read.", []),
    ("rss_peak", "Peak RSS", "Peak resident memory (VmHWM) of the filesystem daemon after the reads.", []),
    ("rss_idle", "Idle RSS", "Resident memory (VmRSS) of the filesystem daemon 5 s after the reads (lazycache drops its in-memory frames after 3 s without reads).", []),
    ("bytes", "Bytes fetched against bytes read", "What the partial job reads against what each approach "
     "downloads. lazycache's figure is counted by the link proxy (bytes the store sent).", []),
]
# Issue 17 item 4 (bench/scenarios.sh, lc_incremental_rows).
SCENARIOS.append(("incr_save", "Incremental save", "`unmount --save` of a mount of the fixture's entry "
                  "(--fill none, cold chunk cache) after one changed file, and on node after 1 % of the "
                  "files changed, against a full `lazycache save` of the tree from local disk.", []))
TITLES = {s[0]: s[1] for s in SCENARIOS}
EXTRA_PEERS = {s[0]: s[3] for s in SCENARIOS}
# Job scenarios -> the scenario whose "job alone on a local tree" row is their reference.
JOB_REFERENCE = {"job": "job", "job_pkg": "job_pkg", "job_learned": "job", "job_large": "job_large",
                 "job_large_learned": "job_large", "job_traced": "job", "job_large_traced": "job_large"}
# Value rows: no wall time, kept out of the timing tables and the chart.
VALUE_SCENARIOS = ("rss_peak", "rss_idle", "bytes", "download")


def load_rows(path):
    rows = []
    with open(path, encoding="utf-8") as f:
        header = f.readline().rstrip("\n").split("\t")
        for line in f:
            vals = line.rstrip("\n").split("\t")
            if len(vals) < len(header):
                continue
            r = dict(zip(header, vals))
            try:
                r["note"] = json.loads(r["note"]) if r["note"] else {}
            except json.JSONDecodeError:
                r["note"] = {"raw": r["note"]}
            for k in ("median_s", "min_s", "max_s", "load1"):
                r[k] = float(r[k]) if r[k] not in ("", None) else None
            r["runs"] = int(r["runs"] or 0)
            rows.append(r)
    return rows


def derived_rows(rows):
    """Value rows read off the notes of timed rows, so each figure has a row of its own: what a
    lazycache mount fetched during the partial job (by the link proxy, and by lazycache's own
    count) and the mount daemon's RSS during the cold full read."""
    out = []
    for r in rows:
        n = r["note"]
        base = {"fixture": r["fixture"], "profile": r["profile"], "runs": 1, "load1": r["load1"],
                "command": "from the last run of: " + r["tool"]}

        def add(scen, tool, value, u):
            out.append(dict(base, scenario=scen, tool=tool, median_s=value, min_s=value, max_s=value,
                            note={"unit": u}))
        if r["scenario"] in JOB_REFERENCE and "fetched_bytes" in n:
            label = {"job": "", "job_pkg": "whole packages: ", "job_learned": "second run: ", "job_large": "",
                     "job_large_learned": "second run: ", "job_traced": "after a traced save: ",
                     "job_large_traced": "after a traced save: "}[r["scenario"]] + r["tool"]
            add("bytes", label + ": bytes the store sent (link proxy)", n["fetched_bytes"] / 1048576, "MiB")
            if "lc_store_bytes" in n:
                add("bytes", label + ": bytes fetched (lazycache's count)", n["lc_store_bytes"] / 1048576, "MiB")
            if "lc_store_range_reads" in n:
                add("bytes", label + ": range reads", float(n["lc_store_range_reads"]), "reads")
        if r["scenario"] == "read_cold" and is_lazycache(r):
            if "rss_peak_kib" in n:
                add("rss_peak", "lazycache mount (cold full read over the link)", n["rss_peak_kib"] / 1024, "MiB")
            if "rss_idle_kib" in n:
                add("rss_idle", "lazycache mount (cold full read over the link)", n["rss_idle_kib"] / 1024, "MiB")
    return out


def is_lazycache(r):
    return r["tool"].startswith("lazycache")


def unit(r):
    return r["note"].get("unit", "s")


def fmt_num(v, u):
    if v is None:
        return ""
    if u == "s":
        return f"{v:.3f}" if v < 10 else f"{v:.2f}"
    return f"{v:,.1f}"


def fmt_bytes(b):
    return f"{b / 1048576:,.1f} MiB"


def note_text(r):
    n = r["note"]
    if "not_measured" in n:
        return "not measured: " + n["not_measured"]
    parts = []
    if "archive_bytes" in n:
        parts.append("archive " + fmt_bytes(n["archive_bytes"]))
    if "fetched_bytes" in n:
        parts.append("fetched " + fmt_bytes(n["fetched_bytes"]))
    if "job_file_bytes" in n:
        parts.append("job's files " + fmt_bytes(n["job_file_bytes"]))
    if "lc_store_bytes" in n:
        parts.append("lazycache counted " + fmt_bytes(n["lc_store_bytes"]) + " from the store")
    if "lc_bytes_served" in n:
        parts.append(fmt_bytes(n["lc_bytes_served"]) + " served")
    if "lc_files_opened" in n:
        parts.append(f"{n['lc_files_opened']:,} files opened")
    if "rss_peak_kib" in n:
        parts.append(f"daemon peak RSS {n['rss_peak_kib'] / 1024:,.1f} MiB")
    if "rss_idle_kib" in n:
        parts.append(f"idle RSS {n['rss_idle_kib'] / 1024:,.1f} MiB")
    return ", ".join(parts)


def groups(rows):
    """(scenario, fixture, profile) -> rows, in first-seen order."""
    out = {}
    for r in rows:
        out.setdefault((r["scenario"], r["fixture"], r["profile"]), []).append(r)
    return out


def reference(group_rows):
    """The lazycache row peers are compared with: its mount when measured (the product's way),
    else its default settings' row (the transfer sweep), else the first measured lazycache row."""
    measured = [r for r in group_rows if is_lazycache(r) and r["median_s"] is not None]
    mounts = [r for r in measured if "mount" in r["tool"]]
    defaults = [r for r in measured if "(default)" in r["tool"]]
    return (mounts or defaults or measured or [None])[0]


def with_extra_peers(g, scen, fx, prof):
    """A group's rows plus the rows of the scenarios it is quoted against (same fixture, link)."""
    rows = list(g[(scen, fx, prof)])
    for e in EXTRA_PEERS.get(scen, []):
        rows += g.get((e, fx, prof), [])
    return rows


def best_peer(group_rows):
    """The fastest measured peer. Not peers: a job alone on a ready tree (a floor) and a bare
    download (a reference: it leaves no usable tree)."""
    peers = [r for r in group_rows
             if not is_lazycache(r) and r["median_s"] is not None and "alone" not in r["tool"]
             and r["scenario"] != "download"]
    return min(peers, key=lambda r: r["median_s"]) if peers else None


def job_alone(g, scen, fx, prof):
    """The reference of a job scenario: its "job alone on a local tree" row, or None."""
    base = JOB_REFERENCE.get(scen)
    if base is None:
        return None
    for r in g.get((base, fx, prof), []):
        if "alone" in r["tool"] and r["median_s"] is not None:
            return r
    return None


def overhead(r, alone):
    """Cache overhead of one way: (restore or mount) + job + unmount, minus the job alone on a
    local tree (both medians, seconds). None when either is missing or r is the reference."""
    if alone is None or r is alone or r["median_s"] is None or "alone" in r["tool"]:
        return None
    return r["median_s"] - alone["median_s"]


def overhead_table(g):
    """Per job group: (scenario, fixture, link, lazycache row, its overhead, best peer row, its
    overhead, peer overhead ÷ lazycache overhead or None). lazycache's row is its mount (the
    product's way); the best peer is the peer with the smallest overhead, from the group or its
    reference scenario (a second run is quoted against the first run's peers)."""
    out = []
    for (scen, fx, prof), grs in g.items():
        alone = job_alone(g, scen, fx, prof)
        if alone is None:
            continue
        ref = reference(grs)
        peers = [r for r in with_extra_peers(g, scen, fx, prof) if not is_lazycache(r)]
        peers = [(overhead(r, alone), r) for r in peers]
        peers = [(o, r) for o, r in peers if o is not None]
        best_o, best = min(peers, key=lambda t: t[0]) if peers else (None, None)
        lc_o = overhead(ref, alone) if ref else None
        rt = None
        if best_o is not None and lc_o is not None:
            rt = best_o / lc_o if lc_o > 0 else float("inf")
        out.append({"scenario": scen, "fixture": fx, "profile": prof, "lazycache": ref, "lazycache_overhead_s": lc_o,
                    "best_peer": best, "best_peer_overhead_s": best_o, "ratio": rt, "alone": alone})
    return out


def ratio(r, ref):
    if ref is None or r["median_s"] is None or not ref["median_s"] or r is ref:
        return ""
    return f"{r['median_s'] / ref['median_s']:.2f}"


def md_escape(s):
    return s.replace("|", "\\|")


def find_row(g, scen, fx, prof, tool_prefix):
    for r in g.get((scen, fx, prof), []):
        if r["tool"].startswith(tool_prefix) and r["median_s"] is not None:
            return r
    return None


def fmt_ratio(x):
    return "inf (lazycache's overhead <= 0)" if x == float("inf") else f"{x:.2f}x"


def peer_overhead(g, scen, fx, prof, tool_prefix):
    """Overhead of the first measured row of tool_prefix in scen (or its reference scenario)."""
    alone = job_alone(g, scen, fx, prof)
    for s in (scen, JOB_REFERENCE.get(scen, scen)):
        r = find_row(g, s, fx, prof, tool_prefix)
        if r is not None and alone is not None:
            return overhead(r, alone)
    return None


# Cache-overhead targets of the mount read-path issue (15): actions/cache's overhead over
# lazycache's mount's, per job scenario and fixture.
OVERHEAD_TARGETS = [("job", "node", 4.0), ("job_pkg", "node", 4.0), ("job_learned", "node", 5.0),
                    ("job_large", "large", 5.0), ("job_large_learned", "large", 10.0)]


def overhead_goals(g, link_profiles):
    out = []
    for prof in link_profiles:
        for scen, fx, target in OVERHEAD_TARGETS:
            lc = find_row(g, scen, fx, prof, "lazycache mount")
            alone = job_alone(g, scen, fx, prof)
            ac = peer_overhead(g, scen, fx, prof, "actions/cache")
            if lc is None or alone is None or ac is None:
                continue
            lo = overhead(lc, alone)
            x = ac / lo if lo > 0 else float("inf")
            out.append((f"{TITLES.get(scen, scen)}: cache overhead of actions/cache ÷ lazycache mount's "
                        f"({ac:.2f} s ÷ {lo:.2f} s)", prof, fmt_ratio(x), f">= {target:g}x", "met" if x >= target else "NOT met"))
            acr = find_row(g, scen, fx, prof, "actions/cache")
            if scen in ("job", "job_pkg") and acr:
                e = acr["median_s"] / lc["median_s"]
                out.append((f"{TITLES.get(scen, scen)}: end to end, actions/cache ÷ lazycache mount", prof,
                            f"{e:.2f}x", ">= 1.5x", "met" if e >= 1.5 else "NOT met"))
    return out


def restore_goals(g, fixtures, link_profiles):
    """The full-restore issue (16): >= 1.5x faster than curl | zstd -d | tar -x and >= 1.2x faster
    than rclone 8 streams + extract, every fixture and link."""
    out = []
    for fx in fixtures:
        for prof in link_profiles:
            lc = find_row(g, "restore", fx, prof, "lazycache restore")
            for peer, target in (("curl | zstd -d | tar -x", 1.5), ("rclone 8 streams", 1.2)):
                p = find_row(g, "restore", fx, prof, peer)
                if lc and p:
                    x = p["median_s"] / lc["median_s"]
                    out.append((f"Full restore ({fx}): >= {target:g}x faster than {peer}", prof, f"{x:.2f}x",
                                f">= {target:g}x", "met" if x >= target else "NOT met"))
    return out


def traced_goals(g, link_profiles):
    """Issue 17 item 6: the first mount of an entry saved after a traced job performs like the
    learned second run, within 1.2x of its time and of the bytes the store sent."""
    out = []
    for prof in link_profiles:
        for traced, learned, fx in (("job_traced", "job_learned", "node"), ("job_large_traced", "job_large_learned", "large")):
            t = find_row(g, traced, fx, prof, "lazycache mount")
            le = find_row(g, learned, fx, prof, "lazycache mount")
            if not t or not le:
                continue
            x = t["median_s"] / le["median_s"]
            out.append((f"{TITLES[traced]}: time against the second run", prof, f"{x:.2f}x", "<= 1.2x", "met" if x <= 1.2 else "NOT met"))
            tb, lb = t["note"].get("fetched_bytes"), le["note"].get("fetched_bytes")
            if tb is not None and lb:
                y = tb / lb
                out.append((f"{TITLES[traced]}: bytes fetched against the second run", prof, f"{y:.2f}x", "<= 1.2x",
                            "met" if y <= 1.2 else "NOT met"))
    return out


# Issue 17 item 4: (fixture, tool prefix, time limit in s or None, fraction of a full save or None).
INCREMENTAL_TARGETS = [("node", "lazycache unmount --save, one changed file", 0.5, None),
                       ("large", "lazycache unmount --save, one changed file", 2.0, None),
                       ("node", "lazycache unmount --save, 1 %", None, 0.2)]


def incremental_goals(g, link_profiles):
    out = []
    for prof in link_profiles:
        for fx, tool, limit, share in INCREMENTAL_TARGETS:
            r = find_row(g, "incr_save", fx, prof, tool)
            full = find_row(g, "incr_save", fx, prof, "lazycache save (full")
            if r is None:
                continue
            t = r["median_s"]
            if limit is not None:
                out.append((f"{tool} ({fx}): time", prof, f"{t:.2f} s", f"<= {limit:g} s", "met" if t <= limit else "NOT met"))
            if share is not None and full:
                x = t / full["median_s"]
                out.append((f"{tool} ({fx}): time against a full save ({t:.2f} s ÷ {full['median_s']:.2f} s)", prof,
                            f"{x:.2f}x", f"<= {share:g}x", "met" if x <= share else "NOT met"))
            n = r["note"]
            if limit is not None and all(k in n for k in ("uploaded_mib", "changed_zst_bytes", "index_mib")):
                ref = n["changed_zst_bytes"] / 1048576 + n["index_mib"] + n.get("read_back_mib", 0)
                x = n["uploaded_mib"] / ref if ref > 0 else float("inf")
                out.append((f"{tool} ({fx}): MiB uploaded ({n['uploaded_mib']:.1f}) against changed files compressed "
                            f"+ index + runs read back ({ref:.1f})", prof, f"{x:.2f}x", "<= 2x", "met" if x <= 2 else "NOT met"))
    return out


def goal_rows(g):
    """The goals the project is held to (issues 6, 15, 16), each as a figure of this run: (goal,
    where, measured, target, verdict). A goal whose rows were not measured is left out."""
    out = []
    fixtures = sorted({k[1] for k in g})
    link_profiles = sorted({k[2] for k in g if k[2] != "local"})

    def verdict(ok):
        return "met" if ok else "NOT met"

    out += overhead_goals(g, link_profiles)
    out += incremental_goals(g, link_profiles)
    out += restore_goals(g, fixtures, link_profiles)
    out += traced_goals(g, link_profiles)
    for fx in fixtures:
        for prof in link_profiles:
            lc = find_row(g, "read_cold", fx, prof, "lazycache mount")
            ac = find_row(g, "read_cold", fx, prof, "actions/cache")
            if lc and ac:
                x = ac["median_s"] / lc["median_s"]
                out.append((f"Cold full read ({fx}): at least as fast as actions/cache", prof, f"{x:.2f}x", ">= 1.0x", verdict(x >= 1.0)))
    for prof in link_profiles:
        for scen in ("job", "job_pkg", "job_learned", "job_large", "job_large_learned", "job_traced", "job_large_traced"):
            fx = "large" if "large" in scen else "node"
            lc = find_row(g, scen, fx, prof, "lazycache mount")
            if not lc:
                continue
            name = TITLES.get(scen, scen)
            n = lc["note"]
            if all(k in n for k in ("fetched_bytes", "job_file_bytes", "archive_bytes", "tree_file_bytes")) and n["job_file_bytes"]:
                equiv = n["job_file_bytes"] * n["archive_bytes"] / n["tree_file_bytes"]
                x = n["fetched_bytes"] / equiv
                limit = 1.5 if "learned" in scen or "traced" in scen else 2.0
                out.append((f"{name}: fetched / compressed size of what it reads", prof, f"{x:.2f}x",
                            f"<= {limit:g}x", verdict(x <= limit)))
    for fx in fixtures:
        lc = find_row(g, "pack", fx, "local", "lazycache pack")
        tz = find_row(g, "pack", fx, "local", "tar | zstd")
        if lc and tz:
            t = lc["median_s"] / tz["median_s"]
            out.append((f"Pack ({fx}): time against tar | zstd -T0 -3", "local", f"{t:.2f}x", "<= 1.0x", verdict(t <= 1.0)))
            if lc["note"].get("archive_bytes") and tz["note"].get("archive_bytes"):
                z = lc["note"]["archive_bytes"] / tz["note"]["archive_bytes"]
                out.append((f"Pack ({fx}): size against tar | zstd -T0 -3", "local", f"{z:.3f}x", "<= 1.05x", verdict(z <= 1.05)))
        for scen in ("find_warm", "read_warm"):
            lc = find_row(g, scen, fx, "local", "lazycache mount")
            sq = [r for r in g.get((scen, fx, "local"), []) if r["tool"].startswith("squashfuse") and r["median_s"] is not None]
            if lc and sq:
                best = min(sq, key=lambda r: r["median_s"])
                x = best["median_s"] / lc["median_s"]
                out.append((f"{TITLES[scen]} ({fx}): at least as fast as {best['tool']}", "local", f"{x:.2f}x", ">= 1.0x", verdict(x >= 1.0)))
    for fx in fixtures:  # issue 15, item 4
        for prof in ["local"] + link_profiles:
            lc = find_row(g, "unmount", fx, prof, "lazycache unmount")
            if lc:
                ms = lc["median_s"] * 1000
                out.append((f"Unmount of an idle mount ({fx})", prof, f"{ms:.0f} ms", "<= 50 ms", verdict(ms <= 50)))
    for prof in link_profiles:
        ready = [(fx, find_row(g, "mount_ready", fx, prof, "lazycache mount")) for fx in fixtures]
        ready = [(fx, r) for fx, r in ready if r and r["note"].get("archive_bytes")]
        if len(ready) >= 2:
            ready.sort(key=lambda t: t[1]["note"]["archive_bytes"])
            small, big = ready[0][1], ready[-1][1]
            growth = big["median_s"] / small["median_s"]
            size = big["note"]["archive_bytes"] / small["note"]["archive_bytes"]
            out.append(("Mount ready does not grow with the archive", prof,
                        f"{growth:.2f}x the time for {size:.1f}x the archive ({ready[-1][0]} vs {ready[0][0]})",
                        "~1x", verdict(growth <= 1.5)))
    return out


def build_markdown(rows, machine, invocation, profiles, profile_info):
    g = groups(rows)
    out = []
    out.append("# lazycache benchmark results\n")
    if "merged_rows_from" in machine:
        out.append("Generated by `bench/report.py` from two invocations of the suite merged as the "
                   "merge_note below says; do not edit by hand.\n")
    else:
        out.append("Generated by `bench/report.py` from one run of the suite; do not edit by hand.\n")
    out.append(f"Reproduce (as root, from a clean clone): `{invocation}`\n")
    out.append("## Machine and run\n")
    out.append("| fact | value |\n| --- | --- |")
    for k in ("cpu", "nproc", "memory", "os", "kernel", "disk", "target_fs", "tools", "commit", "started", "ended",
              "load_at_start", "load_at_end", "merged_rows_from", "merge_note"):
        if k in machine:
            out.append(f"| {k} | {md_escape(str(machine[k]))} |")
    out.append("")
    out.append("The 2 CPU cores are shared by the client tools, the Swift store (Python) and the link "
               "proxy, and with other work on the machine: each row carries the load average (load1) "
               "at its end. \"Cold\" means the guest page cache was dropped; the host still caches the "
               "virtual disk.\n")
    out.append("## Link profiles\n")
    out.append("Every client reaches the store (OpenStack Swift s3api on loopback) through `lc-link-proxy`, "
               "which delays each direction by half the RTT (each request/response turn costs one RTT, a "
               "new connection one more) and caps bandwidth with token buckets per connection and in "
               "total.\n")
    out.append("| profile | RTT | per connection | total |\n| --- | --- | --- | --- |")
    for p in profiles:
        i = profile_info.get(p)
        if i:
            cap = lambda m: f"{m:g} Mbit/s" if m else "no cap"
            out.append(f"| {p} | {i['rtt_ms']:g} ms | {cap(i['conn_mbit'])} | {cap(i['total_mbit'])} |")
    out.append("")
    out.append("## Summary\n")
    out.append("Medians in seconds; \"÷ lazycache\" is the peer's time divided by lazycache's (above 1: "
               "lazycache is faster). The chart is `results.png`.\n")
    out.append("| scenario | fixture | link | lazycache | best peer | best peer ÷ lazycache |")
    out.append("| --- | --- | --- | --- | --- | --- |")
    for (scen, fx, prof), grs in g.items():
        if scen in VALUE_SCENARIOS:
            continue
        ref = reference(grs)
        best = best_peer(with_extra_peers(g, scen, fx, prof))
        lc = f"{fmt_num(ref['median_s'], 's')} ({ref['tool']})" if ref else "not measured"
        bp = ""
        if best:
            where = "" if best["scenario"] == scen else ", " + TITLES.get(best["scenario"], best["scenario"]).lower()
            bp = f"{fmt_num(best['median_s'], 's')} ({best['tool']}{where})"
        rt = ratio(best, ref) if best and ref else ""
        out.append(f"| {TITLES.get(scen, scen)} | {fx} | {prof} | {md_escape(lc)} | {md_escape(bp)} | {rt} |")
    out.append("")
    out.append("### Cache overhead\n")
    out.append("What a CI user pays for the cache in a job: (restore or mount) + job + unmount, minus the "
               "same job alone on a local tree (page cache warm), medians in seconds. Every way starts with "
               "the tree removed and lazycache's chunk cache cleared, and with the programs outside the tree "
               "as warm as for the job alone (the page cache is not dropped before these rows). \"Peer ÷ "
               "lazycache\" above 1: lazycache's overhead is smaller.\n")
    out.append("| scenario | fixture | link | job alone | lazycache overhead | best peer overhead | peer ÷ lazycache |")
    out.append("| --- | --- | --- | --- | --- | --- | --- |")
    for o in overhead_table(g):
        lc = f"{o['lazycache_overhead_s']:.2f} ({o['lazycache']['tool']})" if o["lazycache_overhead_s"] is not None else "not measured"
        bp = f"{o['best_peer_overhead_s']:.2f} ({o['best_peer']['tool']})" if o["best_peer"] else "not measured"
        rt = "" if o["ratio"] is None else fmt_ratio(o["ratio"])
        out.append(f"| {TITLES.get(o['scenario'], o['scenario'])} | {o['fixture']} | {o['profile']} | "
                   f"{fmt_num(o['alone']['median_s'], 's')} | {md_escape(lc)} | {md_escape(bp)} | {rt} |")
    out.append("")
    out.append("## Goals\n")
    out.append("The targets of issues 6, 15 (mount read path: cache overhead) and 16 (full restore), each "
               "computed from the rows of this run (ratios above 1: "
               "lazycache is faster; byte ratios: what the mount fetched over the compressed size of the "
               "files the job reads, i.e. their bytes divided by the archive's compression ratio).\n")
    out.append("| goal | link | measured | target | verdict |\n| --- | --- | --- | --- | --- |")
    goals = goal_rows(g)
    for goal, prof, measured, target, v in goals:
        out.append(f"| {md_escape(goal)} | {prof} | {md_escape(measured)} | {target} | {v} |")
    if not goals:
        out.append("| (no goal could be computed: rows missing) | | | | |")
    out.append("")
    out.append("| figure | fixture | link | lazycache | peers and references |")
    out.append("| --- | --- | --- | --- | --- |")
    for (scen, fx, prof), grs in g.items():
        if scen not in ("rss_peak", "rss_idle", "bytes"):
            continue
        def cell(rs):
            return "; ".join(f"{r['tool']}: {fmt_num(r['median_s'], unit(r))} {unit(r)}" for r in rs
                             if r["median_s"] is not None) or "not measured"
        lcs = [r for r in grs if is_lazycache(r)]
        others = [r for r in grs if not is_lazycache(r)]
        out.append(f"| {TITLES[scen]} | {fx} | {prof} | {md_escape(cell(lcs))} | {md_escape(cell(others))} |")
    out.append("")
    for key, title, what, extra in SCENARIOS:
        keys = [k for k in g if k[0] == key]
        if not keys:
            continue
        out.append(f"## {title}\n")
        out.append(what + "\n")
        out.append("| fixture | link | tool | median | min | max | runs | ÷ lazycache | load1 | notes |")
        out.append("| --- | --- | --- | --- | --- | --- | --- | --- | --- | --- |")
        for k in keys:
            grs = with_extra_peers(g, *k)
            ref = reference(g[k])
            for r in grs:
                u = unit(r)
                tool = r["tool"] + ("" if r["scenario"] == key else f" ({TITLES.get(r['scenario'], r['scenario'])})")
                med = fmt_num(r["median_s"], u) + ("" if u == "s" or r["median_s"] is None else " " + u)
                out.append(f"| {k[1]} | {k[2]} | {md_escape(tool)} | {med} | {fmt_num(r['min_s'], u)} | "
                           f"{fmt_num(r['max_s'], u)} | {r['runs']} | {ratio(r, ref) if u == 's' else ''} | "
                           f"{r['load1'] if r['load1'] is not None else ''} | {md_escape(note_text(r))} |")
        out.append("")
        cmds = []
        for k in keys:
            for r in g[k]:
                c = (r["tool"], r["command"])
                if r["command"] and c not in cmds:
                    cmds.append(c)
        if cmds:
            out.append("<details><summary>exact commands</summary>\n")
            for tool, c in cmds:
                out.append(f"- {md_escape(tool)}: `{c}`")
            out.append("\n</details>\n")
    out.append("## Variables in the commands\n")
    out.append("`$LC` the lazycache binary; `$CURL` = `curl -sS --fail --netrc-file $NETRC --aws-sigv4 "
               "aws:amz:us-east-1:s3 -H x-amz-content-sha256:UNSIGNED-PAYLOAD`; `$E` the store's endpoint "
               "through the link proxy; `$BUCKET` = bench; `$JOBP`/`$JOBD` the job's parent directory and "
               "cached directory; `$T` the fixture tree, `$P`/`$N` its parent and name; `$W` the run's work "
               "directory; `$JOB_CMD` and `$READ_ALL` are spelled out in `bench/scenarios.sh`; "
               "`${LC_STORE_OPTS[@]}` = `--store s3://$BUCKET/lc --endpoint $E --region us-east-1 "
               "--path-style`; `$RCLONE_FLAGS` = `--multi-thread-streams 8 --multi-thread-cutoff 1M`. "
               "Prepare steps (untimed): `fresh_target` (`$JOBP` becomes a new, empty file system: "
               "mkfs.ext4 of a loop image, see target_fs above and bench/run.sh) before every restore, "
               "mount and cold job, and `drop_caches` for every restore and cold read; mounts are "
               "unmounted and lazycache's chunk cache cleared before cold runs.\n")
    return "\n".join(out)


def chart_data(rows):
    """The two panels of results.png: per timed scenario, (label, best peer ÷ lazycache); per job
    scenario, (label, lazycache overhead, best peer overhead)."""
    g = groups(rows)
    ratios, overheads = [], []
    for (scen, fx, prof), grs in g.items():
        if scen in VALUE_SCENARIOS:
            continue
        ref = reference(grs)
        best = best_peer(with_extra_peers(g, scen, fx, prof))
        if best is None or ref is None or not ref["median_s"]:
            continue
        ratios.append((f"{TITLES.get(scen, scen)}, {fx}, {prof}", best["median_s"] / ref["median_s"]))
    for o in overhead_table(g):
        if o["lazycache_overhead_s"] is None or o["best_peer_overhead_s"] is None:
            continue
        overheads.append((f"{TITLES.get(o['scenario'], o['scenario'])}, {o['fixture']}, {o['profile']}",
                          o["lazycache_overhead_s"], o["best_peer_overhead_s"]))
    return ratios, overheads


def chart(rows, out_dir):
    """results.png: top, the ratio best peer ÷ lazycache per scenario (log scale, a line at 1.0:
    above it lazycache is faster); bottom, the cache overhead of lazycache's mount and of the best
    peer per job scenario (seconds)."""
    ratios, overheads = chart_data(rows)
    if not ratios:
        return False
    dat_r = os.path.join(out_dir, "results-ratio.dat")
    dat_o = os.path.join(out_dir, "results-overhead.dat")
    with open(dat_r, "w", encoding="utf-8") as f:
        f.write("".join(f"\"{lbl}\"\t{x:.4f}\n" for lbl, x in ratios))
    with open(dat_o, "w", encoding="utf-8") as f:
        f.write("".join(f"\"{lbl}\"\t{a:.4f}\t{b:.4f}\n" for lbl, a, b in overheads) or "\"none\"\tNaN\tNaN\n")
    width = max(1000, 38 * len(ratios) + 200)
    script = f"""
set terminal pngcairo size {width},1100 font "DejaVu Sans,10"
set output "{os.path.join(out_dir, 'results.png')}"
set datafile separator "\\t"
set datafile missing "NaN"
set multiplot layout 2,1
set style data histograms
set style fill solid 0.85 border -1
set grid ytics
set xtics rotate by -40 font ",8" nomirror
set bmargin 11
set rmargin 16
set title "best peer ÷ lazycache (median wall time; above 1: lazycache is faster; log scale)"
set logscale y
set boxwidth 0.8
set style histogram clustered gap 1
set arrow 1 from graph 0, first 1 to graph 1, first 1 nohead lw 2 lc rgb "#d95f02"
set xrange [-0.6:{len(ratios) - 0.4}]
plot "{dat_r}" using 0:2:($0 - 0.4):($0 + 0.4):(1):2:xtic(1) with boxxyerror notitle lc rgb "#1b9e77" fs solid 0.85 border -1
unset arrow 1
unset logscale y
set autoscale x
set autoscale y
set xzeroaxis lt -1
set title "cache overhead: (restore or mount) + job + unmount - job alone on a local tree (seconds; lower is better)"
set key top left
plot "{dat_o}" using 2:xtic(1) title "lazycache mount" lc rgb "#1b9e77", "" using 3 title "best peer" lc rgb "#7570b3"
unset multiplot
"""
    try:
        subprocess.run(["gnuplot"], input=script, text=True, check=True, capture_output=True)
    except (OSError, subprocess.CalledProcessError) as e:
        err = getattr(e, "stderr", "") or str(e)
        print(f"report.py: gnuplot failed: {err}", file=sys.stderr)
        return False
    finally:
        os.remove(dat_r)
        os.remove(dat_o)
    return True


def write_atomic(path, text):
    tmp = path + ".tmp"
    with open(tmp, "w", encoding="utf-8") as f:
        f.write(text)
    os.replace(tmp, path)


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--tsv", required=True)
    ap.add_argument("--machine", required=True)
    ap.add_argument("--invocation", required=True)
    ap.add_argument("--profiles", required=True, help="JSON list of `lc-link-proxy --describe` objects")
    ap.add_argument("--out", required=True)
    a = ap.parse_args()
    rows = load_rows(a.tsv)
    rows += derived_rows(rows)
    machine = json.loads(a.machine)
    profile_list = json.loads(a.profiles)
    profiles = [p["name"] for p in profile_list]
    profile_info = {p["name"]: p for p in profile_list}
    g = groups(rows)
    result = {
        "invocation": a.invocation,
        "machine": machine,
        "profiles": profile_info,
        "measurements": rows,
        "comparisons": [
            {"scenario": k[0], "fixture": k[1], "profile": k[2],
             "lazycache_tool": ref["tool"], "lazycache_median_s": ref["median_s"],
             "peers": {r["tool"]: {"median_s": r["median_s"],
                                   "ratio_to_lazycache": (r["median_s"] / ref["median_s"]
                                                          if r["median_s"] and ref["median_s"] else None)}
                       for r in grs if not is_lazycache(r) and unit(r) == "s"}}
            for k, grs in g.items() if (ref := reference(grs)) is not None and unit(ref) == "s"
        ],
    }
    write_atomic(os.path.join(a.out, "results.json"), json.dumps(result, indent=1) + "\n")
    write_atomic(os.path.join(a.out, "RESULTS.md"), build_markdown(rows, machine, a.invocation, profiles, profile_info))
    if not chart(rows, a.out):
        print("report.py: no chart written", file=sys.stderr)


if __name__ == "__main__":
    main()

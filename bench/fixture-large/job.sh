#!/usr/bin/env bash
# SPDX-License-Identifier: MIT
# fixture-large/job.sh TREE OUT LIST [smoke] -- the CI step the bench runs on the large fixture:
# real programs of the restored (or mounted) tree TREE, then a fixed list of its files read.
#   python   Debian's /usr/bin/python3 (3.11, the ABI of the packages) imports numpy, scipy,
#            pandas, sympy, networkx, scikit-learn, pygments, jedi, botocore and babel from
#            TREE/usr/lib/python3/dist-packages and computes a little with each
#   java     the tree's JDK compiles and runs a small program (javac, then java: lib/modules,
#            a 130 MB jimage, is mapped and read only in part)
#   llvm     the tree's llc-15 and opt-15 compile a small IR module (libLLVM-15.so.1, 100 MB,
#            mapped and read in part)
#   gcc      the tree's cpp-12 preprocesses Boost.Preprocessor from TREE/usr/include
#   go       the tree's gofmt lists the unformatted files of net/http, `go version`
#   git      the tree's git initialises a repository and commits the step's sources
#   files    every file of LIST (paths relative to TREE) read once, as a test step reads data
# `smoke` runs only the python step (the smoke fixture has only pure-Python packages) and the
# files. The programs outside TREE (python3, the C library, libz3, the JDK's /etc/java-17-openjdk
# configuration that the tree's absolute symlinks name) are the runner's: bench/run.sh installs
# them. Writes only under OUT.
set -euo pipefail
T=${1:?usage: job.sh TREE OUT LIST [smoke]}
OUT=${2:?}
LIST=${3:?}
MODE=${4:-full}
rm -rf "$OUT" && mkdir -p "$OUT"
export PYTHONPATH=$T/usr/lib/python3/dist-packages PYTHONDONTWRITEBYTECODE=1
export LD_LIBRARY_PATH=$T/usr/lib/x86_64-linux-gnu:$T/usr/lib/x86_64-linux-gnu/blas:$T/usr/lib/x86_64-linux-gnu/lapack

if [ "$MODE" = smoke ]; then
  /usr/bin/python3 -s -c '
import six, dateutil.parser
print("python:", six.__file__, dateutil.parser.parse("2026-12-01T10:00:00Z").year)'
else
  /usr/bin/python3 -s -c '
import numpy as np, scipy.linalg, scipy.sparse, scipy.optimize, pandas as pd, sympy, networkx as nx
import sklearn.linear_model, pygments.lexers, jedi, botocore.session, babel.dates, datetime
a = np.random.default_rng(0).random((200, 200))
p, l, u = scipy.linalg.lu(a)
df = pd.DataFrame({"k": np.arange(1000) % 7, "v": np.arange(1000)})
m = sklearn.linear_model.LinearRegression().fit(a[:, :5], a[:, 5])
x = sympy.Symbol("x")
s = botocore.session.get_session().create_client("s3", region_name="us-east-1",
    aws_access_key_id="k", aws_secret_access_key="s")
print("python:", np.__file__, round(float(u[0, 0]), 3), int(df.groupby("k").v.sum()[3]),
      sympy.integrate(sympy.sin(x) ** 2, x), nx.shortest_path_length(nx.path_graph(10), 0, 9),
      len(pygments.lexers.get_lexer_by_name("python").name), s.meta.service_model.service_name,
      babel.dates.format_date(datetime.date(2026, 12, 1), locale="de_DE"), round(m.score(a[:, :5], a[:, 5]), 3))'

  J=$T/usr/lib/jvm/java-17-openjdk-amd64
  mkdir -p "$OUT/java"
  cat > "$OUT/java/Hello.java" <<'EOF'
import java.util.stream.IntStream;
public class Hello {
  public static void main(String[] args) {
    System.out.println("java: " + IntStream.rangeClosed(1, 100).sum() + " " + System.getProperty("java.version"));
  }
}
EOF
  "$J/bin/javac" -d "$OUT/java" "$OUT/java/Hello.java"
  "$J/bin/java" -Xshare:off -cp "$OUT/java" Hello

  L=$T/usr/lib/llvm-15/bin
  cat > "$OUT/f.ll" <<'EOF'
define i32 @sum(i32 %n) {
entry:
  br label %loop
loop:
  %i = phi i32 [ 0, %entry ], [ %i1, %loop ]
  %s = phi i32 [ 0, %entry ], [ %s1, %loop ]
  %s1 = add i32 %s, %i
  %i1 = add i32 %i, 1
  %c = icmp slt i32 %i1, %n
  br i1 %c, label %loop, label %done
done:
  ret i32 %s1
}
EOF
  "$L/opt" -O2 "$OUT/f.ll" -o "$OUT/f.bc"
  "$L/llc" -O2 "$OUT/f.bc" -o "$OUT/f.s"
  echo "llvm: $(grep -c . "$OUT/f.s") lines of assembly"

  printf '#include <boost/preprocessor.hpp>\n#define M(z, n, d) BOOST_PP_CAT(d, n)\nBOOST_PP_REPEAT(20, M, x)\n' > "$OUT/pp.c"
  "$T/usr/bin/cpp-12" -I"$T/usr/include" "$OUT/pp.c" -o "$OUT/pp.i"
  echo "gcc: $(wc -c < "$OUT/pp.i") bytes preprocessed"

  G=$T/usr/lib/go-1.19
  echo "go: $("$G/bin/go" version) $("$G/bin/gofmt" -l "$G/src/net/http" | wc -l) unformatted files"

  GIT_EXEC_PATH=$T/usr/lib/git-core "$T/usr/bin/git" -c init.defaultBranch=main init -q "$OUT/repo"
  cp "$OUT/java/Hello.java" "$OUT/f.ll" "$OUT/repo/"
  GIT_EXEC_PATH=$T/usr/lib/git-core "$T/usr/bin/git" -C "$OUT/repo" add -A
  GIT_EXEC_PATH=$T/usr/lib/git-core "$T/usr/bin/git" -C "$OUT/repo" -c user.name=bench -c user.email=bench@localhost \
    commit -q -m step
  echo "git: $(GIT_EXEC_PATH=$T/usr/lib/git-core "$T/usr/bin/git" -C "$OUT/repo" rev-list --count HEAD) commit"
fi

(cd "$T" && xargs -a "$LIST" -d '\n' cat > /dev/null)
echo "files: $(wc -l < "$LIST") read"

// This directory is urfave/cli v2 (github.com/urfave/cli/v2, MIT
// licensed: LICENSE), copied verbatim by update.sh without its tests and
// without docs.go, its man-page and Markdown generator. docs.go imports
// go-md2man and blackfriday, whose package initialisation costs every
// start of leaderrun about 0.8 ms (GODEBUG=inittrace=1: "init
// github.com/russross/blackfriday/v2 ... 0.76 ms clock"), and only the
// build tag urfave_cli_no_docs leaves it out; `go install
// github.com/leaderrun/leaderrun@latest` cannot pass a tag, and a replace
// directive would make `go install ...@latest` refuse the module. The
// manual page is made by internal/man instead, outside the binary.
//
// Local changes are in local.patch, each marked "leaderrun:" in the code:
// FlagNames, which urfave/cli runs for every flag at every start, uses its
// regexp only for a name that has a comma or a space, and the regexp is
// compiled on first use (a parse of leaderrun's command line: 189 µs ->
// 77 µs, warm, BenchmarkParse in cmd). Do not edit the files otherwise;
// update them with update.sh. Moving to
// urfave/cli v3, which has no man-page code in its module, is the way out
// of the copy.
//
// Version: v2.27.7

package cli

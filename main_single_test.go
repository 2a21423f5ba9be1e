package main

import (
	"bufio"
	"encoding/json"
	"fmt"
	"os"
	"strconv"
	"strings"
)

// singleAppMain is `singleapp`, a COMMAND for `leaderrun --single-instance`
// in testscripts. It prints "primary ARGS" and answers each forwarded
// invocation by its first argument: "exit N" exits N; "hold" accepts and
// never answers; "quit" answers and ends the primary; "big N" writes N
// bytes; "cat" answers with its stdin (--forward-stdin); anything else echoes the arguments (quoted, exact bytes), the cwd
// and the variables. SINGLEAPP_DEAF=1 never reads its invocations;
// SINGLEAPP_PIDFILE names a file for its leaderrun's pid; "hold" also
// creates the file "held".
func singleAppMain() {
	fmt.Printf("primary %q\n", os.Args[1:])
	if f := os.Getenv("SINGLEAPP_PIDFILE"); f != "" {
		os.WriteFile(f, []byte(os.Getenv("LEADERRUN_PID")+"\n"), 0o644)
	}
	if os.Getenv("SINGLEAPP_DEAF") == "1" {
		select {}
	}
	in := os.NewFile(fdFromEnv("LEADERRUN_INVOCATIONS_FD"), "invocations")
	out := os.NewFile(fdFromEnv("LEADERRUN_REPLIES_FD"), "replies")
	enc := json.NewEncoder(out)
	sc := bufio.NewScanner(in)
	sc.Buffer(nil, 16<<20)
	cats := map[string][]byte{} // "cat" invocations reading their stdin
	for sc.Scan() {
		var inv struct {
			ID       string   `json:"id"`
			Args     [][]byte `json:"args_base64"`
			Cwd      string   `json:"cwd"`
			Env      []string `json:"env"`
			Stdin    []byte   `json:"stdin_base64"`
			StdinEOF bool     `json:"stdin_eof"`
		}
		if err := json.Unmarshal(sc.Bytes(), &inv); err != nil {
			fmt.Fprintln(os.Stderr, "singleapp:", err)
			os.Exit(2)
		}
		if buf, ok := cats[inv.ID]; ok && inv.Args == nil {
			cats[inv.ID] = append(buf, inv.Stdin...)
			if inv.StdinEOF {
				enc.Encode(map[string]any{"id": inv.ID, "stdout_base64": cats[inv.ID], "exit": 0})
				delete(cats, inv.ID)
			}
			continue
		}
		args := make([]string, len(inv.Args))
		for i, a := range inv.Args {
			args[i] = string(a)
		}
		first := ""
		if len(args) > 0 {
			first = args[0]
		}
		switch {
		case first == "exit" && len(args) == 2:
			n, _ := strconv.Atoi(args[1])
			enc.Encode(map[string]any{"id": inv.ID, "exit": n})
		case first == "cat":
			cats[inv.ID] = []byte{}
			enc.Encode(map[string]any{"id": inv.ID, "accepted": true})
		case first == "hold":
			enc.Encode(map[string]any{"id": inv.ID, "accepted": true})
			os.WriteFile("held", nil, 0o644)
		case first == "big" && len(args) == 2:
			n, _ := strconv.Atoi(args[1])
			enc.Encode(map[string]any{"id": inv.ID, "stdout": strings.Repeat("x", n) + "\n", "stderr": "big done\n", "exit": 0})
		default:
			enc.Encode(map[string]any{"id": inv.ID, "stdout": fmt.Sprintf("args %q\ncwd %s\nenv %q\n", args, inv.Cwd, inv.Env), "exit": 0})
		}
		if first == "quit" {
			os.Exit(0)
		}
	}
}

func fdFromEnv(name string) uintptr {
	n, err := strconv.Atoi(os.Getenv(name))
	if err != nil {
		fmt.Fprintf(os.Stderr, "singleapp: $%s=%q is not a descriptor\n", name, os.Getenv(name))
		os.Exit(2)
	}
	return uintptr(n)
}

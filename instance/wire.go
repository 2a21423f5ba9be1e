package instance

import (
	"encoding/json"
	"fmt"
)

// The bus carries two requests, as JSON (byte slices travel as base64, so
// arguments, paths and variables keep their exact bytes, valid UTF-8 or
// not):
//
//	submit  {op, id, args, cwd, env, deadline}  ->  {accepted}
//	wait    {op, id, out, err}                  ->  {out, err, done, exit, abandoned}
//
// submit returns once the primary's application has taken the invocation
// (the first phase); wait returns as soon as there is output past the
// offsets the caller has, or the invocation is done (the second phase),
// and is repeated until done. Both are idempotent: a repeated submit of a
// known id never delivers it again, and a repeated wait returns the same
// bytes from the same offsets.
type wireRequest struct {
	Op       string   `json:"op"`
	ID       string   `json:"id"`
	Args     [][]byte `json:"args,omitempty"`
	Cwd      []byte   `json:"cwd,omitempty"`
	Env      [][]byte `json:"env,omitempty"`
	Deadline int64    `json:"deadline,omitempty"` // Unix ns: do not deliver later
	Out      int64    `json:"out,omitempty"`
	Err      int64    `json:"err,omitempty"`
}

type wireReply struct {
	Accepted  bool   `json:"accepted,omitempty"`
	Out       []byte `json:"out,omitempty"`
	Err       []byte `json:"err,omitempty"`
	Done      bool   `json:"done,omitempty"`
	Exit      int    `json:"exit,omitempty"`
	Abandoned bool   `json:"abandoned,omitempty"`
}

const (
	opSubmit = "submit"
	opWait   = "wait"
	// maxChunk bounds the output of one wait reply, each stream, so that
	// it stays well under the bus's 1 MiB message limit after base64.
	maxChunk = 256 << 10
)

func decodeRequest(b []byte) (wireRequest, error) {
	var r wireRequest
	if err := json.Unmarshal(b, &r); err != nil {
		return r, fmt.Errorf("instance: malformed request: %w", err)
	}
	if r.ID == "" || len(r.ID) > 128 {
		return r, fmt.Errorf("instance: malformed request: id of %d bytes", len(r.ID))
	}
	return r, nil
}

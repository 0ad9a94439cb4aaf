package main

import (
	"bufio"
	"encoding/json"
	"errors"
	"fmt"
	"io"

	"snapflow/native/lazy/internal/pack"
)

// writeErrorAnswer writes a failed pass's answer, {"error": {code, message, field}}, to out (the engines' errors carry
// the agent's codes; anything else is tool_failed) and returns err, so the command still exits non-zero.
func writeErrorAnswer(out io.Writer, err error) error {
	var known *pack.Error
	if !errors.As(err, &known) {
		known = &pack.Error{Code: "tool_failed", Message: err.Error()}
	}
	json.NewEncoder(out).Encode(map[string]any{"error": known})
	return err
}

// readRequestLine reads a command's request, one JSON line on stdin, into v (what follows the line stays in r: an
// archive, for unpack); a line that does not decode is bad_request.
func readRequestLine(r *bufio.Reader, v any) error {
	line, err := r.ReadBytes('\n')
	if err != nil && !errors.Is(err, io.EOF) {
		return fmt.Errorf("stdin: %w", err)
	}
	if err := json.Unmarshal(line, v); err != nil {
		return &pack.Error{Code: "bad_request", Message: "stdin: the request line: " + err.Error()}
	}
	return nil
}

package main

import (
	"bufio"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"os"

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

// rootedCommand is the start of a command shaped `NAME --root DIR [--result-fd N] < one JSON line` (files-unpack,
// files-check): its flags parsed, its request line read into req. It answers the root, where the result goes, and
// how a failure is answered there; a request line that does not decode has been answered already (err non-nil).
func rootedCommand(name, rootUsage string, args []string, req any) (root string, resultOut *os.File, answerError func(error) error, err error) {
	fs := newFlags(name)
	rootFlag := fs.String("root", "", rootUsage)
	resultFd := fs.Int("result-fd", 2, "the descriptor the result JSON is written to")
	if err := fs.Parse(args); err != nil {
		return "", nil, nil, err
	}
	if err := required(fs, "root"); err != nil {
		return "", nil, nil, err
	}
	resultOut = os.NewFile(uintptr(*resultFd), "result")
	answerError = func(err error) error { return writeErrorAnswer(resultOut, err) }
	if err := readRequestLine(bufio.NewReaderSize(os.Stdin, 1<<20), req); err != nil {
		return "", nil, nil, answerError(err)
	}
	return *rootFlag, resultOut, answerError, nil
}

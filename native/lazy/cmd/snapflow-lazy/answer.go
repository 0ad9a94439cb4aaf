package main

import (
	"encoding/json"
	"errors"
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

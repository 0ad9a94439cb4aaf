package main

// version: what the agent's probe reports for this helper (container/system/probe.ts asks `snapflow-lazy version`), so a
// run's record says which helper served it. The release is snapflow's own (package.json "version"; a test in
// test/node/probe-versions-unit.test.ts keeps the two equal), then the Go toolchain that built it.

import (
	"fmt"
	"runtime"
)

const release = "0.1.0"

func versionCmd(args []string) error {
	if len(args) > 0 {
		return fmt.Errorf("takes no arguments")
	}
	fmt.Printf("snapflow-lazy %s (%s)\n", release, runtime.Version())
	return nil
}

package main

import (
	"encoding/json"
	"flag"
	"fmt"
	"os"
	"strconv"
	"strings"
)

// byteSize is a flag accepting 524288, 512KiB, 512K, 1MiB, 1M.
type byteSize int

func (b *byteSize) String() string { return strconv.Itoa(int(*b)) }

func (b *byteSize) Set(s string) error {
	units := []struct {
		suffix string
		mult   int
	}{{"KiB", 1 << 10}, {"MiB", 1 << 20}, {"K", 1 << 10}, {"M", 1 << 20}}
	mult := 1
	for _, u := range units {
		if strings.HasSuffix(s, u.suffix) {
			s, mult = strings.TrimSuffix(s, u.suffix), u.mult
			break
		}
	}
	n, err := strconv.Atoi(s)
	if err != nil {
		return fmt.Errorf("size %q: %w", s, err)
	}
	*b = byteSize(n * mult)
	return nil
}

func newFlags(name string) *flag.FlagSet {
	return flag.NewFlagSet("snapflow-lazy "+name, flag.ContinueOnError)
}

func required(fs *flag.FlagSet, names ...string) error {
	for _, n := range names {
		if fs.Lookup(n).Value.String() == "" {
			return fmt.Errorf("--%s is required", n)
		}
	}
	return nil
}

func printJSON(v any) error {
	return json.NewEncoder(os.Stdout).Encode(v)
}

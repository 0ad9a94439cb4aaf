package main

import (
	"bufio"
	"encoding/json"
	"fmt"
	"io"
	"os"
	"strings"

	"golang.org/x/sys/unix"

	"snapflow/native/lazy/internal/beneath"
)

// mergeCmd moves an extracted layer's staging directory into its target without following a symlink in the
// target (internal/beneath); answers {"moved": N}.
func mergeCmd(args []string) error {
	fs := newFlags("merge")
	staging := fs.String("staging", "", "the extracted layer")
	target := fs.String("target", "", "the tree it joins")
	extractedAt := fs.Int64("extracted-at", 0, "when extraction began, ms since the epoch")
	keepOwners := fs.Bool("keep-owners", false, "give directories that were archive entries their archived owner")
	if err := fs.Parse(args); err != nil {
		return err
	}
	if err := required(fs, "staging", "target"); err != nil {
		return err
	}
	from, err := beneath.OpenRoot(*staging)
	if err != nil {
		return err
	}
	defer unix.Close(from)
	to, err := beneath.OpenRoot(*target)
	if err != nil {
		return err
	}
	defer unix.Close(to)
	moved, err := beneath.Merge(from, to, beneath.MergeOptions{ExtractedAtMs: *extractedAt, KeepOwners: *keepOwners})
	if err != nil {
		return err
	}
	return printJSON(map[string]int{"moved": moved})
}

// removeCmd removes the NUL-separated relative entries on stdin below --root (a delta's deletions, which can be
// many and hold any byte but NUL: never argv); answers {"removed": N, "skipped": [...]}.
func removeCmd(args []string) error {
	return namesBelowRoot("remove", args, "the tree the entries are below", func(root int, entries []string) (any, error) {
		return beneath.Remove(root, entries)
	})
}

// opaqueCmd sets overlayfs' opaque mark on the NUL-separated relative directories on stdin below --root (a restored
// overlay upper; see beneath.MarkOpaque); answers {"marked": N}.
func opaqueCmd(args []string) error {
	return namesBelowRoot("opaque", args, "the upper directory the dirs are below", func(root int, dirs []string) (any, error) {
		marked, err := beneath.MarkOpaque(root, dirs)
		return map[string]int{"marked": marked}, err
	})
}

// namesBelowRoot runs a subcommand that takes --root and a NUL-separated list of relative names on stdin (a delta's
// deletions can be many and hold any byte but NUL: never argv).
func namesBelowRoot(name string, args []string, rootHelp string, run func(root int, names []string) (any, error)) error {
	return belowRoot(name, args, rootHelp, func(stdin io.Reader) ([]string, error) {
		list, err := io.ReadAll(stdin)
		if err != nil || len(list) == 0 {
			return []string{}, err
		}
		return strings.Split(strings.TrimSuffix(string(list), "\x00"), "\x00"), nil
	}, run)
}

// relinkCmd makes the JSON groups of names on stdin ([["first","other",…],…], relative to --root) one file again
// (beneath.Relink); answers {"relinked": N}.
func relinkCmd(args []string) error {
	return jsonBelowRoot("relink", args, func(root int, groups [][]string) (any, error) {
		n, err := beneath.Relink(root, groups)
		return map[string]int{"relinked": n}, err
	})
}

// setidCmd sets the modes of the JSON files on stdin ([{"path","mode"},…], relative to --root) through descriptors
// (beneath.SetModes); answers {"set": N, "skipped": [...]}.
func setidCmd(args []string) error {
	return jsonBelowRoot("setid", args, func(root int, files []beneath.ModeOf) (any, error) {
		set, skipped, err := beneath.SetModes(root, files)
		return map[string]any{"set": set, "skipped": skipped}, err
	})
}

// sanitizeCmd removes device nodes below --root and, without --keep-owners, gives every entry to the caller and clears
// setuid/setgid (beneath.Sanitize); answers {"devicesRemoved","setidCleared","ownersReset"}.
func sanitizeCmd(args []string) error {
	fs := newFlags("sanitize")
	root := fs.String("root", "", "the freshly extracted tree")
	keepOwners := fs.Bool("keep-owners", false, "keep owners and setuid/setgid bits (devices are removed either way)")
	if err := fs.Parse(args); err != nil {
		return err
	}
	if err := required(fs, "root"); err != nil {
		return err
	}
	dir, err := beneath.OpenRoot(*root)
	if err != nil {
		return err
	}
	defer unix.Close(dir)
	out, err := beneath.Sanitize(dir, *keepOwners)
	if err != nil {
		return err
	}
	return printJSON(out)
}

// jsonBelowRoot runs a subcommand that takes --root and one JSON value on stdin.
func jsonBelowRoot[T any](name string, args []string, run func(root int, in T) (any, error)) error {
	return belowRoot(name, args, "the tree the names are below", func(stdin io.Reader) (T, error) {
		var in T
		if err := json.NewDecoder(stdin).Decode(&in); err != nil {
			return in, fmt.Errorf("stdin: %w", err)
		}
		return in, nil
	}, run)
}

// belowRoot parses --root, reads the subcommand's input from stdin, holds the root open as a descriptor while run
// acts beneath it, and prints what run answers.
func belowRoot[T any](name string, args []string, rootHelp string, read func(io.Reader) (T, error), run func(root int, in T) (any, error)) error {
	fs := newFlags(name)
	root := fs.String("root", "", rootHelp)
	if err := fs.Parse(args); err != nil {
		return err
	}
	if err := required(fs, "root"); err != nil {
		return err
	}
	in, err := read(bufio.NewReader(os.Stdin))
	if err != nil {
		return err
	}
	dir, err := beneath.OpenRoot(*root)
	if err != nil {
		return err
	}
	defer unix.Close(dir)
	out, err := run(dir, in)
	if err != nil {
		return err
	}
	return printJSON(out)
}

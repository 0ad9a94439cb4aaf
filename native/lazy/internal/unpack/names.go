package unpack

import (
	"fmt"
	"strings"
)

// entryName is an archive name as the manifest names it ("./a/b/" → "a/b", the root "./" → ""), or a refusal: an
// absolute name, a '..' or '.' component, an empty component or a NUL could only lead somewhere the tree is not, and
// no archive snapflow makes holds one (GNU tar strips a leading '/' and refuses '..'; here both are refused).
func entryName(raw, what string) (string, error) {
	p := strings.TrimPrefix(raw, "./")
	p = strings.TrimRight(p, "/")
	if p == "" || p == "." {
		if strings.HasPrefix(raw, "/") {
			return "", outside(raw, what, "an absolute name")
		}
		return "", nil
	}
	if strings.HasPrefix(raw, "/") {
		return "", outside(raw, what, "an absolute name")
	}
	if strings.Contains(p, "\x00") {
		return "", outside(raw, what, "a NUL in the name")
	}
	for _, part := range strings.Split(p, "/") {
		switch part {
		case "..":
			return "", outside(raw, what, "a '..' component")
		case ".", "":
			return "", outside(raw, what, "an empty or '.' component")
		}
	}
	return p, nil
}

func outside(raw, what, why string) error {
	return &Error{Code: "path_outside_root", Field: "archive", Message: fmt.Sprintf("the archive's %s %q is refused: %s could lead outside the restored tree", what, raw, why)}
}

// splitName answers a name's parent ("" for the root) and last component.
func splitName(p string) (string, string) {
	if i := strings.LastIndexByte(p, '/'); i >= 0 {
		return p[:i], p[i+1:]
	}
	return "", p
}

package pack

import (
	"slices"
	"strings"
	"unicode/utf8"
)

// sortNames sorts a directory's names as the agent's walk does (JavaScript's default sort: by UTF-16 code units),
// so both walks, and so both manifests, list a tree in the same order. UTF-8 byte order differs from it only
// between a character above U+FFFF (a surrogate pair, 0xD800–0xDFFF) and one in U+E000–U+FFFF.
func sortNames(names []string) {
	slices.SortFunc(names, CompareUTF16)
}

// CompareUTF16 orders two names as JavaScript's default sort does (by UTF-16 code units); unpack's walk uses it too.
func CompareUTF16(a, b string) int {
	i := 0
	for i < len(a) && i < len(b) && a[i] == b[i] {
		i++
	}
	if i == len(a) || i == len(b) {
		return len(a) - len(b)
	}
	// Back up to the start of the character the first differing byte is in.
	for i > 0 && !utf8.RuneStart(a[i]) {
		i--
	}
	ra, _ := utf8.DecodeRuneInString(a[i:])
	rb, _ := utf8.DecodeRuneInString(b[i:])
	return utf16Key(ra) - utf16Key(rb)
}

// utf16Key orders characters as their first UTF-16 code unit does, then by code point (a pair's second unit grows
// with it).
func utf16Key(r rune) int {
	if r >= 0x10000 {
		return (0xD800+int((r-0x10000)>>10))<<21 | int(r)
	}
	return int(r) << 21
}

// undecodable is the name as the agent's Node reads it (each byte that is not UTF-8 becomes U+FFFD), for messages.
func undecodable(name string) string {
	var b strings.Builder
	for i := 0; i < len(name); {
		r, n := utf8.DecodeRuneInString(name[i:])
		if r == utf8.RuneError && n == 1 {
			b.WriteRune(utf8.RuneError)
		} else {
			b.WriteString(name[i : i+n])
		}
		i += n
	}
	return b.String()
}

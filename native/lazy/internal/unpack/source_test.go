package unpack

import (
	"bytes"
	"context"
	"fmt"
	"io"
	"math/rand"
	"net/http"
	"net/http/httptest"
	"strings"
	"testing"
	"time"
)

// A body cut off mid-way is resumed from the next byte (Range), and the bytes read equal the object's.
func TestDownloadResumesAfterABrokenBody(t *testing.T) {
	blob := make([]byte, 3<<20)
	rand.New(rand.NewSource(1)).Read(blob)
	var ranges []string
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		ranges = append(ranges, r.Header.Get("Range"))
		if len(ranges) == 1 {
			// Promise all of it, send a third, drop the connection.
			w.Header().Set("Content-Length", fmt.Sprint(len(blob)))
			w.WriteHeader(http.StatusOK)
			w.Write(blob[:1<<20])
			w.(http.Flusher).Flush()
			conn, _, _ := w.(http.Hijacker).Hijack()
			conn.Close()
			return
		}
		http.ServeContent(w, r, "a", time.Time{}, bytes.NewReader(blob))
	}))
	defer srv.Close()
	d := NewDownload(context.Background(), srv.URL, 5*time.Second, 2)
	got, err := io.ReadAll(d)
	if err != nil {
		t.Fatal(err)
	}
	// Read again after the end, as a buffered reader does: still the end, no request past it.
	if n, err := d.Read(make([]byte, 10)); n != 0 || err != io.EOF {
		t.Fatalf("after the end: %d, %v", n, err)
	}
	if !bytes.Equal(got, blob) || d.Attempts != 2 || !strings.HasPrefix(ranges[1], "bytes=") || ranges[1] == "bytes=0-" {
		t.Fatalf("equal %v, attempts %d, ranges %q", bytes.Equal(got, blob), d.Attempts, ranges)
	}
}

// A store that answers a resume with the whole object (200, not 206) fails the download: its bytes would repeat.
func TestDownloadRefusesAResumeFromTheStart(t *testing.T) {
	n := 0
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		n++
		w.Header().Set("Content-Length", "100")
		w.WriteHeader(http.StatusOK)
		w.Write(bytes.Repeat([]byte("x"), 40))
		w.(http.Flusher).Flush()
		conn, _, _ := w.(http.Hijacker).Hijack()
		conn.Close()
	}))
	defer srv.Close()
	_, err := io.ReadAll(NewDownload(context.Background(), srv.URL, 5*time.Second, 3))
	if err == nil || !strings.Contains(err.Error(), "answered 200") {
		t.Fatalf("want the resume refused, got %v", err)
	}
}

// A ranged download asks for its range only, resumes a broken body from the next byte of it (never past its end),
// and refuses a store that answers with the whole object.
func TestRangeDownloadAsksForItsRangeAndResumesWithinIt(t *testing.T) {
	blob := make([]byte, 2<<20)
	rand.New(rand.NewSource(2)).Read(blob)
	var ranges []string
	ignoreRange := false
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		ranges = append(ranges, r.Header.Get("Range"))
		if ignoreRange {
			w.WriteHeader(http.StatusOK)
			w.Write(blob)
			return
		}
		if len(ranges) == 1 {
			// Promise the range, send 1000 bytes of it, drop the connection.
			var from, to int
			fmt.Sscanf(r.Header.Get("Range"), "bytes=%d-%d", &from, &to)
			w.Header().Set("Content-Range", fmt.Sprintf("bytes %d-%d/%d", from, to, len(blob)))
			w.Header().Set("Content-Length", fmt.Sprint(to+1-from))
			w.WriteHeader(http.StatusPartialContent)
			w.Write(blob[from : from+1000])
			w.(http.Flusher).Flush()
			conn, _, _ := w.(http.Hijacker).Hijack()
			conn.Close()
			return
		}
		http.ServeContent(w, r, "a", time.Time{}, bytes.NewReader(blob))
	}))
	defer srv.Close()
	d := NewRangeDownload(context.Background(), srv.URL, 300_000, 500_000, 5*time.Second, 2)
	got, err := io.ReadAll(d)
	if err != nil {
		t.Fatal(err)
	}
	want := []string{"bytes=300000-799999", "bytes=301000-799999"}
	if !bytes.Equal(got, blob[300_000:800_000]) || fmt.Sprint(ranges) != fmt.Sprint(want) || d.Attempts != 2 {
		t.Fatalf("equal %v, attempts %d, ranges %q (want %q)", bytes.Equal(got, blob[300_000:800_000]), d.Attempts, ranges, want)
	}
	ignoreRange = true
	_, err = io.ReadAll(NewRangeDownload(context.Background(), srv.URL, 10, 20, 5*time.Second, 2))
	if err == nil || !strings.Contains(err.Error(), "answered 200") {
		t.Fatalf("want a 200 refused, got %v", err)
	}
}

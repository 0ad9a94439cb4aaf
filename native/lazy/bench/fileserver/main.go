// Command fileserver serves a directory over loopback HTTP for the measurements (bench/measure.py, bench/latency.py):
// the stand-in for the store's presigned GETs when timing a restore's fetches. An optional LATENCY (a Go duration)
// delays every response's start by that much, as a remote store's time to first byte does (loopback has none).
// Usage: fileserver DIR ADDR [LATENCY]
package main

import (
	"log"
	"net/http"
	"os"
	"time"
)

func main() {
	if len(os.Args) != 3 && len(os.Args) != 4 {
		log.Fatal("usage: fileserver DIR ADDR [LATENCY]")
	}
	var latency time.Duration
	if len(os.Args) == 4 {
		var err error
		if latency, err = time.ParseDuration(os.Args[3]); err != nil {
			log.Fatal(err)
		}
	}
	files := http.FileServer(http.Dir(os.Args[1]))
	log.Fatal(http.ListenAndServe(os.Args[2], http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		time.Sleep(latency)
		files.ServeHTTP(w, r)
	})))
}

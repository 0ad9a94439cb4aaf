// Command fileserver serves a directory over loopback HTTP for the measurements (bench/measure.py): the stand-in for
// the store's presigned GETs when timing a restore's fetches. Usage: fileserver DIR ADDR
package main

import (
	"log"
	"net/http"
	"os"
)

func main() {
	if len(os.Args) != 3 {
		log.Fatal("usage: fileserver DIR ADDR")
	}
	log.Fatal(http.ListenAndServe(os.Args[2], http.FileServer(http.Dir(os.Args[1]))))
}

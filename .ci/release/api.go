package main

import "io"

// APICheck is written next.
func APICheck(w io.Writer, repo Repo) error { return nil }

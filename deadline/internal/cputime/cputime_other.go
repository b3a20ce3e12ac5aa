//go:build !linux

package cputime

import "time"

func thread() time.Duration { return wall() }

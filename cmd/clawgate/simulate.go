package main

import "io"

func cmdSimulate(args []string, stdout, stderr io.Writer) int { return 2 }

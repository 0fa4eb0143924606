//go:build race

package proxy_test

// raceEnabled: the race detector makes sync.Pool drop items at random, so
// pooled code allocates and allocation counts mean nothing.
const raceEnabled = true

package doortest

import (
	"testing"

	"github.com/clawgate/clawgate/config"
)

// ForEach runs one subtest per door, and Of names the door each runs on.
func TestForEachAndOf(t *testing.T) {
	var got []config.ServerKind
	ForEach(t, func(t *testing.T) {
		got = append(got, Of(t))
		t.Run("nested", func(t *testing.T) {
			if Of(t) != got[len(got)-1] {
				t.Errorf("nested subtest of %s runs on %s", got[len(got)-1], Of(t))
			}
		})
	})
	if len(got) != 2 || got[0] != config.ServerNetHTTP || got[1] != config.ServerFastHTTP {
		t.Fatalf("doors run: %v, want net/http then fasthttp", got)
	}
	if Of(t) != config.ServerNetHTTP {
		t.Fatalf("outside ForEach: %s, want net/http", Of(t))
	}
}

package ledger

import (
	"strings"
	"testing"
)

// Each library function comes after those it calls (a Lua local function
// sees only the locals defined before it), and a script holds just the
// functions its body needs.
func TestLuaLibraryOrder(t *testing.T) {
	names := map[string]int{}
	for i, f := range luaLib[1:] {
		names[f.name] = i + 1
		if !strings.Contains(f.src, "local function "+f.name+"(") {
			t.Errorf("library entry %q does not define it", f.name)
		}
	}
	for i, f := range luaLib {
		for name, j := range names {
			if j != i && luaCalls(f.src, name) && j > i {
				t.Errorf("%s calls %s, defined after it", f.name, name)
			}
		}
	}
}

func TestLuaSource(t *testing.T) {
	src := luaSource("return key_queue(KEYS[1], KEYS[2], 'e', 't', 'fp', 1)")
	for _, want := range []string{"local ENQ, QUEUED", "function key_new(", "function key_undelivered(", "function key_queue("} {
		if !strings.Contains(src, want) {
			t.Errorf("the script lacks %q:\n%s", want, src)
		}
	}
	for _, not := range []string{"function key_seen(", "function key_replay(", "function key_dead("} {
		if strings.Contains(src, not) {
			t.Errorf("the script holds %q, which it never calls", not)
		}
	}
	if strings.Index(src, "function key_new(") > strings.Index(src, "function key_queue(") {
		t.Error("key_queue is defined before key_new, which it calls")
	}
}

package config

import (
	"os"
	"path/filepath"
)

// Log says where log lines go.
type Log struct {
	// AccessFile is a file the access lines (one JSON line per delivery,
	// "msg":"delivery") are appended to, apart from the application lines,
	// which stay on stderr. Relative to the config's directory; created
	// with mode 0640 when missing; its directory must exist. The gateway
	// reopens it on SIGHUP and POST /admin/reload (after logrotate moved
	// it), at the path the reloaded file names. The access lines go there
	// at level info whatever serve's -log-level. Empty (the default):
	// access lines go to stderr with the application lines.
	AccessFile string `yaml:"access_file"`
}

// checkLog validates the log block: the access file's directory exists and
// the path, when it exists, is not a directory. The file is opened when
// the gateway starts.
func (b *builder) checkLog() {
	l := &b.cfg.Log
	if l.AccessFile == "" {
		return
	}
	line := b.line("log", "access_file")
	l.AccessFile = b.resolvePath(l.AccessFile)
	dir := filepath.Dir(l.AccessFile)
	if fi, err := os.Stat(dir); err != nil || !fi.IsDir() {
		b.ps.add(line, "log.access_file", "directory %s does not exist; create it or name a file in an existing directory", dir)
		return
	}
	if fi, err := os.Stat(l.AccessFile); err == nil && !fi.Mode().IsRegular() {
		b.ps.add(line, "log.access_file", "%s is not a regular file", l.AccessFile)
	}
}

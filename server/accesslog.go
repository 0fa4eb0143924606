package server

import (
	"log/slog"
	"time"

	"github.com/clawgate/clawgate/config"
	"github.com/clawgate/clawgate/logging"
)

// accessLog is log.access_file: the access lines, batched like the lines
// on stderr, appended to a file that reloads reopen.
type accessLog struct {
	file *logging.File
	buf  *logging.Buffered
	log  *slog.Logger
}

// openAccessLog opens cfg's log.access_file; nil when none is set.
func openAccessLog(cfg *config.Config) (*accessLog, error) {
	if cfg.Log.AccessFile == "" {
		return nil, nil
	}
	f, err := logging.OpenFile(cfg.Log.AccessFile)
	if err != nil {
		return nil, err
	}
	buf := logging.NewBuffered(f, 100*time.Millisecond, 64<<10)
	return &accessLog{file: f, buf: buf, log: slog.New(logging.NewHandler(buf, slog.LevelInfo))}, nil
}

// logger is the access lines' logger; nil (the application log) without a
// file.
func (a *accessLog) logger() *slog.Logger {
	if a == nil {
		return nil
	}
	return a.log
}

// reopen reopens the file at path, the reloaded config's
// log.access_file, after writing out what is waiting: logrotate's
// moved file ends whole and the lines after the reload go to the new one.
// Setting or clearing log.access_file takes effect at the next restart.
func (a *accessLog) reopen(path string, log *slog.Logger) error {
	switch {
	case a == nil && path != "":
		log.Warn("config reload: log.access_file set; it takes effect at the next restart")
		return nil
	case a == nil:
		return nil
	case path == "":
		log.Warn("config reload: log.access_file cleared; it takes effect at the next restart", "access_file", a.file.Path())
		path = a.file.Path()
	}
	a.buf.Flush()
	return a.file.Reopen(path)
}

// close writes out what is waiting and closes the file.
func (a *accessLog) close() {
	if a == nil {
		return
	}
	a.buf.Close()
	a.file.Close()
}

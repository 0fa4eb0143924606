package logging

import (
	"fmt"
	"os"
	"sync"
)

// File is a log file opened for appending that can be reopened, at the
// same path or a new one, while lines are being written: after logrotate
// moved it, a reopen starts a new file at the path. Each Write goes whole
// to one file.
type File struct {
	mu   sync.Mutex
	f    *os.File
	path string
}

// OpenFile opens path for appending, creating it with mode 0640.
func OpenFile(path string) (*File, error) {
	f, err := openAppend(path)
	if err != nil {
		return nil, err
	}
	return &File{f: f, path: path}, nil
}

func openAppend(path string) (*os.File, error) {
	f, err := os.OpenFile(path, os.O_WRONLY|os.O_APPEND|os.O_CREATE, 0o640)
	if err != nil {
		return nil, fmt.Errorf("log file: %w", err)
	}
	return f, nil
}

// Write appends p to the current file.
func (l *File) Write(p []byte) (int, error) {
	l.mu.Lock()
	defer l.mu.Unlock()
	if l.f == nil {
		return 0, os.ErrClosed
	}
	return l.f.Write(p)
}

// Path is the path of the file being written.
func (l *File) Path() string {
	l.mu.Lock()
	defer l.mu.Unlock()
	return l.path
}

// Reopen opens path (the same path, or a new one) and closes the file
// written so far. When path cannot be opened, the current file stays in
// use and the error is returned.
func (l *File) Reopen(path string) error {
	f, err := openAppend(path)
	if err != nil {
		return err
	}
	l.mu.Lock()
	old := l.f
	l.f, l.path = f, path
	l.mu.Unlock()
	if old != nil {
		return old.Close()
	}
	return nil
}

// Close closes the file; later writes fail with os.ErrClosed.
func (l *File) Close() error {
	l.mu.Lock()
	defer l.mu.Unlock()
	if l.f == nil {
		return nil
	}
	err := l.f.Close()
	l.f = nil
	return err
}

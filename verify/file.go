package verify

import (
	"fmt"
	"io"
	"io/fs"
	"os"
)

// maxKeyFile bounds secret, PEM and JWKS files.
const maxKeyFile = 1 << 20

// readKeyFile reads a secret_file, pem_file or jwks_file: a regular file of
// at most 1 MiB, so a path naming a device or a FIFO cannot hang the loader.
func readKeyFile(path string) ([]byte, error) {
	b, _, err := readKeyFileMode(path)
	return b, err
}

// readKeyFileMode is readKeyFile that also returns the file's permission
// bits.
func readKeyFileMode(path string) ([]byte, fs.FileMode, error) {
	f, err := os.Open(path)
	if err != nil {
		return nil, 0, err
	}
	defer f.Close()
	st, err := f.Stat()
	if err != nil {
		return nil, 0, err
	}
	if !st.Mode().IsRegular() {
		return nil, 0, fmt.Errorf("not a regular file")
	}
	b, err := io.ReadAll(io.LimitReader(f, maxKeyFile+1))
	if err != nil {
		return nil, 0, err
	}
	if len(b) > maxKeyFile {
		return nil, 0, fmt.Errorf("larger than 1MiB")
	}
	return b, st.Mode().Perm(), nil
}

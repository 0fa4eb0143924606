package config

// Config is the file.
type Config struct {
	// Listen is the address.
	// Default ":8080".
	Listen string `yaml:"listen"`
	Mode   Mode   `yaml:"mode"` // Mode is how.
	// Inner has an unnamed struct type.
	Inner struct {
		// Deep is inside.
		Deep int `yaml:"deep"`
	} `yaml:"inner"`
	// Resolved is not a YAML field.
	Resolved string `yaml:"-"`
}

// Internal has no YAML field, so its doc is not kept.
type Internal struct {
	// X is internal.
	X int
}

// Mode is an enum.
type Mode string

// Modes.
const (
	ModeA Mode = "a"
	ModeB Mode = "b"
	other      = "not typed"
)

package verify

// Config is verify's.
type Config struct {
	// Scheme names the scheme.
	//
	// A second paragraph.
	Scheme string `yaml:"scheme"`
}

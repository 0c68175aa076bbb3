package ledger

import (
	"bytes"
	"context"
	"image"
	"image/png"
	"os"
	"os/exec"
	"path/filepath"
	"regexp"
	"strings"
	"testing"
	"time"
)

// report is the hand-calculated ledger of records() up to 12:00, with a NodePool name that
// needs escaping.
func report(t *testing.T) Report {
	var l Ledger
	for _, a := range records() {
		a.Rule = `<script>alert("x")</script>`
		if err := l.Add(a); err != nil {
			t.Fatal(err)
		}
	}
	return l.Report(t10.Add(2 * time.Hour))
}

func TestWriteHTMLEscapesAndCarriesTheNumbers(t *testing.T) {
	var b bytes.Buffer
	if err := WriteHTML(&b, report(t)); err != nil {
		t.Fatal(err)
	}
	page := b.String()
	if strings.Contains(page, "<script>") {
		t.Error("a rule reached the page unescaped")
	}
	for _, want := range []string{`id="total-spend">1.0560<`, `id="total-baseline">1.3440<`, `id="total-saving-static">0.2880<`,
		`id="total-saving-noconsolidation">1.5360<`, `class="price" data-last="0.5760"`, `class="lowerbound" data-last="0.5000"`} {
		if !strings.Contains(page, want) {
			t.Errorf("page lacks %s", want)
		}
	}
	if strings.Contains(page, "http://") && !strings.Contains(page, `xmlns="http://www.w3.org/2000/svg"`) || strings.Contains(page, "src=") || strings.Contains(page, "href=") {
		t.Error("the page refers to an external asset")
	}
}

// chromium finds Debian's chromium: DOVETAIL_CHROMIUM, the PATH, or hack/tools.sh's unpacked copy.
func chromium() string {
	if p := os.Getenv("DOVETAIL_CHROMIUM"); p != "" {
		return p
	}
	if p, err := exec.LookPath("chromium"); err == nil {
		return p
	}
	p, _ := filepath.Abs("../../.cache/tools/chromium/usr/bin/chromium")
	if _, err := os.Stat(p); err == nil {
		return p
	}
	return ""
}

// TestReportInChromium loads the report in headless Chromium (Debian's package; hack/tools.sh
// installs it): the DOM it builds carries the ledger's numbers and both charts' lines, and its
// screenshot is not blank.
func TestReportInChromium(t *testing.T) {
	bin := chromium()
	if bin == "" {
		t.Skip("chromium not found (hack/tools.sh installs Debian's chromium; or set DOVETAIL_CHROMIUM): the report is not checked in a browser")
	}
	dir := t.TempDir()
	path := filepath.Join(dir, "cost.html")
	var b bytes.Buffer
	if err := WriteHTML(&b, report(t)); err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(path, b.Bytes(), 0o600); err != nil {
		t.Fatal(err)
	}
	ctx, cancel := context.WithTimeout(context.Background(), 3*time.Minute)
	defer cancel()
	run := func(args ...string) []byte {
		args = append([]string{"--headless", "--no-sandbox", "--disable-gpu", "--user-data-dir=" + filepath.Join(dir, "profile")}, args...)
		out, err := exec.CommandContext(ctx, bin, append(args, "file://"+path)...).Output()
		if err != nil {
			t.Skipf("chromium cannot run here (%s): %v", bin, err)
		}
		return out
	}
	dom := string(run("--dump-dom"))
	for _, re := range []string{`id="total-spend">1\.0560<`, `id="total-saving-noconsolidation">1\.5360<`,
		`<polyline class="price" data-last="0\.5760" points="[0-9., ]+"`, `<polyline class="cpu" data-last="50\.0%"`, `<circle class="decision"`} {
		if !regexp.MustCompile(re).MatchString(dom) {
			t.Errorf("the DOM Chromium built lacks %s", re)
		}
	}
	shot := filepath.Join(dir, "shot.png")
	run("--screenshot="+shot, "--window-size=900,1400", "--hide-scrollbars")
	f, err := os.Open(shot)
	if err != nil {
		t.Fatal(err)
	}
	defer f.Close()
	img, err := png.Decode(f)
	if err != nil {
		t.Fatal(err)
	}
	// The page's background is white; the charts' lines, text and tables are not.
	ink := inked(img)
	if total := img.Bounds().Dx() * img.Bounds().Dy(); ink < total/100 {
		t.Errorf("screenshot: %d of %d pixels differ from the white background, want at least 1%%", ink, total)
	}
}

func inked(img image.Image) int {
	n := 0
	b := img.Bounds()
	for y := b.Min.Y; y < b.Max.Y; y++ {
		for x := b.Min.X; x < b.Max.X; x++ {
			r, g, bl, _ := img.At(x, y).RGBA()
			if r < 0xf000 || g < 0xf000 || bl < 0xf000 {
				n++
			}
		}
	}
	return n
}

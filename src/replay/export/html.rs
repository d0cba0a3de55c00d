//! `--html`: one self-contained page that plays the asciicast with asciinema's web player
//! (vendored in `assets/asciinema-player/`, Apache-2.0), the player and the cast inline.

/// The player's version, its script and style sheet.
pub const PLAYER_VERSION: &str = "3.17.0";
const PLAYER_JS: &str = include_str!("../../../assets/asciinema-player/asciinema-player.min.js");
const PLAYER_CSS: &str = include_str!("../../../assets/asciinema-player/asciinema-player.css");

/// `s` as a JavaScript string literal that is safe inside `<script>`: JSON, with every `<` written
/// `\u003c` (no `</script>` nor `<!--` can end or bend the script), and U+2028/U+2029 escaped.
pub fn script_string(s: &str) -> String {
    serde_json::to_string(s)
        .expect("a string serializes")
        .replace('<', "\\u003c")
        .replace('\u{2028}', "\\u2028")
        .replace('\u{2029}', "\\u2029")
}

/// The page: `cast` (an asciicast v2 file) of `cols`×`rows`, `title` escaped here. It shows the
/// first frame and plays on a click (or Space).
pub fn page(cast: &str, cols: u16, rows: u16, title: &str) -> String {
    let title = super::svg::xml_text(title);
    format!(
        "<!DOCTYPE html>\n<html lang=\"en\">\n<head>\n<meta charset=\"utf-8\">\n\
         <meta name=\"viewport\" content=\"width=device-width, initial-scale=1\">\n\
         <title>{title}</title>\n\
         <!-- asciinema player {PLAYER_VERSION}, (c) Marcin Kulik, Apache License 2.0 -->\n\
         <style>\n{PLAYER_CSS}\n</style>\n\
         <style>body {{ background: #121314; color: #ccc; margin: 0; padding: 1em; font-family: sans-serif; }}\n\
         h1 {{ font-size: 1em; font-weight: normal; }}</style>\n\
         </head>\n<body>\n<h1>{title}</h1>\n<div id=\"player\"></div>\n\
         <script>\n{PLAYER_JS}\n</script>\n\
         <script>\nAsciinemaPlayer.create({{ data: {cast} }}, document.getElementById(\"player\"), \
         {{ cols: {cols}, rows: {rows}, preload: true, poster: \"npt:0.001\", fit: \"width\", \
         controls: true }});\n</script>\n</body>\n</html>\n",
        cast = script_string(cast),
    )
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_cast_cannot_end_the_script() {
        let s = script_string("a</script><!--\u{2028}\u{1b}");
        assert_eq!(s, "\"a\\u003c/script>\\u003c!--\\u2028\\u001b\"");
        let page = page("x</script><b>", 80, 24, "<i>&");
        assert_eq!(page.matches("</script>").count(), 2, "the player's and ours");
        assert!(page.contains("<title>&lt;i&gt;&amp;</title>"));
        assert!(page.contains("cols: 80, rows: 24"));
    }
}

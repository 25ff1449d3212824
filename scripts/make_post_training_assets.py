"""Cut the post-training cookbook's bundled clip set from the cookbook's own rendered clips.

Four clips, each 33 frames at 320x192 (the 256p tier's 16:9 canvas, the smoke size), at its source's own frame rate,
in the `datasets` videofolder layout the dataset cookbook writes: `clips/<name>.mp4` beside `clips/metadata.jsonl`.
The metadata is written by hand, one row per clip: its `file_name`, its `fps` and `caption_json`, a structured caption
in the layout Cosmos 3 was trained on (the one NVIDIA's fine-tuning data, BridgeData2-Subset-Synthetic-Captions,
carries). This script writes the clips its rows name, at their frame rates: the sources' first 33 frames, scaled to
cover the canvas and centre-cropped, H.264 with fixed settings, so running it again writes the same bytes.

    python scripts/make_post_training_assets.py
"""

from __future__ import annotations

import json
from pathlib import Path

import numpy as np
from make_conditioning_assets import write_mp4

from helpers import media

GENERATOR = Path(__file__).resolve().parents[1] / "cookbooks" / "cosmos3" / "generator"
CLIPS = GENERATOR / "post_training" / "assets" / "clips"
CANVAS, FRAMES = (320, 192), 33
SOURCES = {  # name: the source clip, relative to cookbooks/cosmos3/generator/
    "rolling_ball": "audiovisual/assets/videos/rolling_ball.mp4",
    "car_drive": "action/assets/videos/av_drive.mp4",
    "robot_pick": "action/assets/videos/droid_pick.mp4",
    "city_street": "transfer/assets/videos/street.mp4",
}


def main() -> None:
    rows = [json.loads(line) for line in (CLIPS / "metadata.jsonl").read_text().splitlines()]
    for row in rows:
        name = row["file_name"].removesuffix(".mp4")
        source = GENERATOR / SOURCES[name]
        if media.probe(source).fps != row["fps"]:
            raise SystemExit(
                f"{row['file_name']}: metadata.jsonl says {row['fps']} fps, its source has {media.probe(source).fps}"
            )
        fitted = [np.asarray(media.fit_frame(frame, *CANVAS)) for frame in media.load_video(source, max_frames=FRAMES)]
        write_mp4(fitted, CLIPS / row["file_name"], fps=row["fps"])
    print(f"wrote {len(rows)} clips to {CLIPS}")


if __name__ == "__main__":
    main()

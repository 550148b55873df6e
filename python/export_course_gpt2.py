"""python/export_course.py for a decoder (kept for the commands that name it):
the course's left-padded window programs, window.pte and window-per-position.pte.

    python python/export_course_gpt2.py --model CHECKPOINT_DIR --out models/course-gpt2 [--len 32]
"""

import sys

from export_course import main

if __name__ == "__main__":
    sys.exit(main(sys.argv[1:], default_out="models/course-gpt2"))

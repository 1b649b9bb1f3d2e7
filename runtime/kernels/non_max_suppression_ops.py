"""Non-max suppression kernels: NonMaxSuppression (V1-V5) and CombinedNonMaxSuppression.

Boxes are taken highest score first (ties by the lower index, TF's priority queue order); each
step selects one box and suppresses every remaining box whose IoU with it exceeds the threshold,
vectorised over the boxes. Split out of ``image_ops.py`` to keep modules small.
"""

from __future__ import annotations

import numpy as np

from runtime.errors import UnimplementedError
from runtime.kernels.math_ops import invalid, shape_str
from runtime.kernels.registry import kernel

# --------------------------------------------------------------------------- non-max suppression


def _iou(box, boxes):
    y1, x1 = np.minimum(box[0], box[2]), np.minimum(box[1], box[3])
    y2, x2 = np.maximum(box[0], box[2]), np.maximum(box[1], box[3])
    ys1, xs1 = np.minimum(boxes[:, 0], boxes[:, 2]), np.minimum(boxes[:, 1], boxes[:, 3])
    ys2, xs2 = np.maximum(boxes[:, 0], boxes[:, 2]), np.maximum(boxes[:, 1], boxes[:, 3])
    area = (y2 - y1) * (x2 - x1)
    areas = (ys2 - ys1) * (xs2 - xs1)
    inter = np.maximum(np.minimum(y2, ys2) - np.maximum(y1, ys1), 0) * np.maximum(
        np.minimum(x2, xs2) - np.maximum(x1, xs1), 0
    )
    with np.errstate(all="ignore"):
        iou = inter / (area + areas - inter)
    return np.where((area <= 0) | (areas <= 0), 0, iou)


def _nms(boxes, scores, max_output_size, iou_threshold, score_threshold):
    if boxes.ndim != 2 or boxes.shape[1] != 4:
        raise invalid(f"boxes must be 2-D{shape_str(boxes.shape)}")
    if scores.shape != (boxes.shape[0],):
        raise invalid("scores has incompatible shape")
    limit = int(np.asarray(max_output_size))
    if limit < 0:
        raise invalid("output size must be non-negative")
    iou_t = float(np.asarray(iou_threshold))
    if not 0 <= iou_t <= 1:
        raise invalid("iou_threshold must be in [0, 1]")
    b = boxes.astype(np.float32)
    s = scores.astype(np.float32)
    candidates = np.flatnonzero(s > np.float32(score_threshold))
    # Highest score first, ties by the lower index (TF's priority queue order).
    order = candidates[np.argsort(-s[candidates], kind="stable")]
    alive = np.ones(order.size, np.bool_)
    selected = []
    position = 0
    # One iteration per selected box: everything it suppresses goes at once.
    while len(selected) < limit:
        remaining = np.flatnonzero(alive[position:])
        if remaining.size == 0:
            break
        position += int(remaining[0])
        chosen = order[position]
        selected.append(chosen)
        alive[position] = False
        rest = slice(position + 1, None)
        alive[rest] &= ~(_iou(b[chosen], b[order[rest]]) > np.float32(iou_t))
    return np.asarray(selected, np.int32)


@kernel("NonMaxSuppression")
def non_max_suppression(boxes, scores, max_output_size, *, iou_threshold=0.5):
    return _nms(boxes, scores, max_output_size, iou_threshold, -np.inf)


@kernel("NonMaxSuppressionV2")
def non_max_suppression_v2(boxes, scores, max_output_size, iou_threshold):
    return _nms(boxes, scores, max_output_size, iou_threshold, -np.inf)


@kernel("NonMaxSuppressionV3")
def non_max_suppression_v3(boxes, scores, max_output_size, iou_threshold, score_threshold):
    return _nms(boxes, scores, max_output_size, iou_threshold, float(np.asarray(score_threshold)))


@kernel("NonMaxSuppressionV4")
def non_max_suppression_v4(
    boxes, scores, max_output_size, iou_threshold, score_threshold, *, pad_to_max_output_size=False
):
    selected = _nms(boxes, scores, max_output_size, iou_threshold, float(np.asarray(score_threshold)))
    valid = np.asarray(selected.size, np.int32)
    if pad_to_max_output_size:
        selected = np.pad(selected, (0, int(np.asarray(max_output_size)) - selected.size))
    return selected, valid


@kernel("NonMaxSuppressionV5")
def non_max_suppression_v5(
    boxes,
    scores,
    max_output_size,
    iou_threshold,
    score_threshold,
    soft_nms_sigma,
    *,
    pad_to_max_output_size=False,
):
    if float(np.asarray(soft_nms_sigma)) > 0:
        raise UnimplementedError(None, None, "NonMaxSuppressionV5 with soft_nms_sigma > 0 is not supported")
    selected, valid = non_max_suppression_v4(
        boxes,
        scores,
        max_output_size,
        iou_threshold,
        score_threshold,
        pad_to_max_output_size=pad_to_max_output_size,
    )
    chosen = selected[: int(valid)]
    selected_scores = np.zeros(selected.shape, scores.dtype)
    selected_scores[: chosen.size] = scores[chosen]
    return selected, selected_scores, valid


@kernel("CombinedNonMaxSuppression")
def combined_non_max_suppression(
    boxes,
    scores,
    max_output_size_per_class,
    max_total_size,
    iou_threshold,
    score_threshold,
    *,
    pad_per_class=False,
    clip_boxes=True,
):
    if boxes.ndim != 4 or boxes.shape[3] != 4:
        raise invalid(f"boxes must be 4-D[batch_size, num_boxes, q, 4]{shape_str(boxes.shape)}")
    if scores.ndim != 3 or scores.shape[:2] != boxes.shape[:2]:
        raise invalid(f"scores must be 3-D[batch_size, num_boxes, num_classes]{shape_str(scores.shape)}")
    batch, _, q, _ = boxes.shape
    num_classes = scores.shape[2]
    if q not in (1, num_classes):
        raise invalid("third dimension of boxes must be either 1 or num classes")
    per_class = int(np.asarray(max_output_size_per_class))
    total = int(np.asarray(max_total_size))
    if total <= 0:
        raise invalid("max_total_size should be > 0")
    detections = min(total, per_class * num_classes) if pad_per_class else total
    out_boxes = np.zeros((batch, detections, 4), np.float32)
    out_scores = np.zeros((batch, detections), np.float32)
    out_classes = np.zeros((batch, detections), np.float32)
    valid = np.zeros(batch, np.int32)
    threshold = float(np.asarray(score_threshold))
    for b in range(batch):  # one NMS per image and class, each vectorised over the boxes
        found_scores, found_classes, found_boxes = [], [], []
        for c in range(num_classes):
            class_boxes = boxes[b, :, 0 if q == 1 else c].astype(np.float32)
            chosen = _nms(class_boxes, scores[b, :, c], per_class, iou_threshold, threshold)
            found_scores.append(scores[b, chosen, c].astype(np.float32))
            found_classes.append(np.full(chosen.size, c, np.float32))
            found_boxes.append(class_boxes[chosen])
        all_scores = np.concatenate(found_scores)
        order = np.argsort(-all_scores, kind="stable")[:detections]
        count = order.size
        picked = np.concatenate(found_boxes)[order]
        if clip_boxes:
            picked = np.clip(picked, 0, 1)
        out_boxes[b, :count] = picked
        out_scores[b, :count] = all_scores[order]
        out_classes[b, :count] = np.concatenate(found_classes)[order]
        valid[b] = count
    return out_boxes, out_scores, out_classes, valid

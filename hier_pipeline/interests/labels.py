"""Human-readable names for primitives: the values of the item table's categorical columns that
most of a primitive's items share, the words that set its items apart (c-TF-IDF), and the items
that sit closest to its centroid."""

from __future__ import annotations

import numpy as np
import pandas as pd
import scipy.sparse as sp
import torch
from sklearn.feature_extraction.text import CountVectorizer
from torch import Tensor

from hier_pipeline.interests.hierarchy import InterestHierarchy


def distinctive_words(
    texts: list[str], hierarchy: InterestHierarchy, top: int = 3
) -> list[list[str]]:
    """Per primitive, its `top` words by class-based TF-IDF against the other primitives of its
    level (BERTopic's c-TF-IDF): tf = count in the class / words in the class, idf = log(1 + mean
    words per class / count in all classes). Empty lists where the items have no text."""
    try:
        counts = CountVectorizer(stop_words="english", token_pattern=r"(?u)\b[^\W\d_]{3,}\b").fit(
            texts
        )
    except ValueError:  # no item has a word: nothing to name primitives by
        return [[] for _ in hierarchy.token_ids]
    documents = counts.transform(texts)
    vocabulary = counts.get_feature_names_out()
    words: list[list[str]] = []
    for level in range(hierarchy.levels):
        span = hierarchy.level(level)
        member = (hierarchy.members[:, level] - span.start).numpy()
        onehot = sp.csr_matrix(
            (np.ones(len(member)), (member, np.arange(len(member)))),
            shape=(span.stop - span.start, len(member)),
        )
        per_class = (onehot @ documents).toarray().astype(np.float64)
        length = per_class.sum(axis=1, keepdims=True)
        tf = per_class / np.maximum(length, 1)
        idf = np.log(1 + length.mean() / np.maximum(per_class.sum(axis=0), 1))
        score = tf * idf
        for row in score:
            best = np.argsort(-row, kind="stable")[:top]
            words.append([str(vocabulary[j]) for j in best if row[j] > 0])
    return words


def common_values(
    columns: dict[str, list[str]], hierarchy: InterestHierarchy, share: float = 0.5
) -> list[list[str]]:
    """Per primitive, `column: value` for each categorical column whose most common value among
    its items covers more than `share` of them (a department most of an interest's products are
    in names it; a mix names nothing). Columns: name -> values in item order."""
    named: list[list[str]] = [[] for _ in hierarchy.token_ids]
    for column, values in columns.items():
        codes, names = pd.factorize(pd.Series(values))
        frame = pd.DataFrame(
            {
                "token": hierarchy.members.flatten().numpy(),
                "value": np.repeat(codes, hierarchy.levels),
            }
        )
        frame = frame[frame["value"] >= 0]
        counts = frame.groupby(["token", "value"]).size()
        best = counts.groupby(level=0).idxmax()
        for token, (_, value) in best.items():
            if counts[(token, value)] > share * int(hierarchy.sizes()[token]) and names[value]:
                named[int(token)].append(f"{column}: {names[value]}")
    return named


def nearest_members(items: Tensor, hierarchy: InterestHierarchy, count: int = 3) -> list[list[int]]:
    """Per primitive, its member items closest to its centroid (item indices, closest first)."""
    examples: list[list[int]] = []
    for level in range(hierarchy.levels):
        member = hierarchy.members[:, level]
        similarity = (items * hierarchy.centroids[member]).sum(dim=1)
        order = torch.argsort(-similarity, stable=True)
        by_primitive = torch.argsort(member[order], stable=True)
        ranked, owners = order[by_primitive], member[order][by_primitive]
        span = hierarchy.level(level)
        bounds = torch.searchsorted(owners, torch.arange(span.start, span.stop + 1))
        examples += [
            ranked[bounds[i] : min(bounds[i + 1], bounds[i] + count)].tolist()
            for i in range(span.stop - span.start)
        ]
    return examples

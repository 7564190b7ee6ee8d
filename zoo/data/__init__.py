"""The data sets zoo members train on: image sources (`images`) and tokenized text (`text`).
"""

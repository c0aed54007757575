"""onyxia.operators"""
